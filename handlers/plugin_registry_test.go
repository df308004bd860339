package handlers_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/registry"
	ggcrtypes "github.com/google/go-containerregistry/pkg/v1/types"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tailplane/tailplane/handlers/lib/resources"
	"github.com/tailplane/tailplane/handlers/plugin"
	"github.com/tailplane/tailplane/internal/testpoll"
	"github.com/tailplane/tailplane/plugins/remote"
)

// noopGuest is the smallest http-wasm guest (memory, handle_request that
// always passes on, handle_response), padded with a custom section of n
// random bytes: a module of any size and a digest of its own that compiles.
func noopGuest(n int) []byte {
	mod := []byte("\x00asm\x01\x00\x00\x00" +
		"\x01\x0a\x02\x60\x00\x01\x7e\x60\x02\x7f\x7f\x00" +
		"\x03\x03\x02\x00\x01" +
		"\x05\x03\x01\x00\x01" +
		"\x07\x2d\x03\x06memory\x02\x00\x0ehandle_request\x00\x00\x0fhandle_response\x00\x01" +
		"\x0a\x09\x02\x04\x00\x42\x01\x0b\x02\x00\x0b")
	payload := append([]byte{3, 'p', 'a', 'd'}, make([]byte, n)...)
	_, _ = rand.Read(payload[4:])
	mod = append(mod, 0)
	for v := uint32(len(payload)); ; v >>= 7 {
		if v < 0x80 {
			mod = append(mod, byte(v))
			break
		}
		mod = append(mod, byte(v&0x7f)|0x80)
	}
	return append(mod, payload...)
}

func hexSHA256(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

type basicKeychain struct{}

func (basicKeychain) Resolve(authn.Resource) (authn.Authenticator, error) {
	return &authn.Basic{Username: "puller", Password: "s3cret"}, nil
}

// testRegistry is go-containerregistry's registry on loopback (plain HTTP,
// as for any loopback registry); a private one wants puller:s3cret.
func testRegistry(t *testing.T, private bool) (string, func()) {
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); private && (!ok || u != "puller" || p != "s3cret") {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		reg.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), srv.Close
}

// A RoutingPlugin whose module is in a registry: the operator pulls it
// (with the pull secret), checks the pin and compiles it, stores one copy
// per digest in Secrets of the operator namespace (a module of several MiB:
// no 1 MiB ceiling) and names them in the proxy's config and Role. Every
// failed update (not wasm, wrong digest, unknown tag, registry down, too
// large, credentials missing) is its own Accepted reason and Event, and
// the previous module keeps serving; a good update rolls the proxies to
// the new digest and the old copy is collected.
func TestRoutingPluginFromRegistry(t *testing.T) {
	host, stopRegistry := testRegistry(t, false)
	privateHost, stopPrivate := testRegistry(t, true)
	v1, v2 := noopGuest(2<<20), noopGuest(2<<20)
	pin1, pin2 := hexSHA256(v1), hexSHA256(v2)
	push := func(ref string, b []byte, mt ggcrtypes.MediaType) {
		t.Helper()
		if _, err := remote.Push(context.Background(), ref, b, remote.PushOptions{Keychain: basicKeychain{}, LayerMediaType: mt}); err != nil {
			t.Fatal(err)
		}
	}
	push(host+"/plugins/gate:v1", v1, "")
	push(host+"/plugins/gate:v2", v2, "")
	push(host+"/plugins/gate:text", []byte("not a module"), remote.MediaTypeWasmLayer)
	push(privateHost+"/private/gate:v2", v2, "")
	closed := httptest.NewServer(http.NotFoundHandler())
	down := strings.TrimPrefix(closed.URL, "http://")
	closed.Close()

	h := newHarness(t, nil)
	h.createIngressClass(false)
	h.backend("web", 80)
	h.createIngress("site", nil, networkingv1.IngressSpec{DefaultBackend: defaultBackend("web", 80)})
	testpoll.Until(t, settle, "proxy", func() error { return h.proxyExists("ingress", "site") })
	rp := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "tailplane.dev/v1alpha1", "kind": "RoutingPlugin",
		"metadata": map[string]any{"name": "gate", "namespace": h.ns},
		"spec": map[string]any{
			"module":  map[string]any{"oci": map[string]any{"ref": "oci://" + host + "/plugins/gate:v1"}, "sha256": pin1},
			"targets": map[string]any{"targetRefs": []any{map[string]any{"kind": "Ingress", "name": "site"}}},
		},
	}}
	if _, err := h.dyn.Resource(resources.RoutingPlugins).Namespace(h.ns).Create(h.ctx(), rp, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// servesOnly waits until the proxy's config runs exactly the module sum.
	servesOnly := func(sum string) {
		t.Helper()
		testpoll.Until(t, settle, "proxy config with "+sum, func() error {
			cfg, err := h.proxyConfig("ingress", "site")
			if err != nil {
				return err
			}
			if len(cfg.Plugins) != 1 {
				return fmt.Errorf("plugins %+v", cfg.Plugins)
			}
			var spec plugin.Spec
			if err := json.Unmarshal(cfg.Plugins[0].Spec, &spec); err != nil {
				return err
			}
			if spec.Module.SHA256 != sum || !slices.Equal(spec.Module.SecretChunks, plugin.ChunkNames(sum, len(spec.Module.SecretChunks))) || spec.Module.OCI != nil {
				return fmt.Errorf("module %+v", spec.Module)
			}
			return nil
		})
	}
	wantAccepted := func(want, sum string) {
		t.Helper()
		testpoll.Until(t, settle, "Accepted "+want, func() error {
			st, msg, obj := h.pluginCondition("gate", "Accepted")
			if st != want {
				return fmt.Errorf("%s %s", st, msg)
			}
			if s, _, _ := unstructured.NestedString(obj.Object, "status", "sha256"); s != sum {
				return fmt.Errorf("status.sha256 %s, want %s (the serving module)", s, sum)
			}
			return nil
		})
	}
	patchModule := func(module map[string]any) {
		t.Helper()
		b, _ := json.Marshal(map[string]any{"spec": map[string]any{"module": module}})
		if _, err := h.dyn.Resource(resources.RoutingPlugins).Namespace(h.ns).Patch(h.ctx(), "gate", types.MergePatchType, b, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	wantAccepted("True/Compiled", pin1)
	servesOnly(pin1)
	chunks1 := h.wantModuleCopy(pin1, "ingress", "site")
	if len(chunks1) < 2 {
		t.Fatalf("a 2 MiB module in %d Secret(s)", len(chunks1))
	}
	h.wantEvent(h.ns, "gate", corev1.EventTypeNormal, "Compiled", host+"/plugins/gate@sha256:")

	// Failed updates: each reason, and v1 keeps serving.
	for _, step := range []struct {
		module         map[string]any
		reason, detail string
	}{
		{map[string]any{"oci": map[string]any{"ref": host + "/plugins/gate:text"}, "sha256": nil}, "NotWasm", "wasm header"},
		// Always: with IfNotPresent the pin alone would select v1's copy.
		{map[string]any{"oci": map[string]any{"ref": host + "/plugins/gate:v2", "pullPolicy": "Always"}, "sha256": pin1}, "SHA256Mismatch", pin2},
		{map[string]any{"oci": map[string]any{"ref": host + "/plugins/gate:v3", "pullPolicy": nil}, "sha256": nil}, "SourceNotFound", "gate:v3"},
		{map[string]any{"oci": map[string]any{"ref": down + "/plugins/gate:v2"}}, "SourceUnreachable", down},
		{map[string]any{"oci": map[string]any{"ref": host + "/plugins/gate:v2"}, "maxSize": "1Mi"}, "ModuleTooLarge", "limit"},
		{map[string]any{"oci": map[string]any{"ref": privateHost + "/private/gate:v2"}, "maxSize": nil}, "PullUnauthorized", "unauthorized"},
		{map[string]any{"oci": map[string]any{"ref": privateHost + "/private/gate:v2", "imagePullSecret": "regcred"}}, "PullSecretNotFound", "regcred"},
	} {
		patchModule(step.module)
		wantAccepted("False/"+step.reason, pin1)
		h.wantEvent(h.ns, "gate", corev1.EventTypeWarning, step.reason, step.detail)
		if st, msg, _ := h.pluginCondition("gate", "Ready"); !strings.Contains(msg, "previous module (sha256 "+pin1+") keeps serving") {
			t.Fatalf("%s: Ready %s %q, want it to say the previous module serves", step.reason, st, msg)
		}
		servesOnly(pin1)
	}

	// The pull secret appears: v2 is pulled, the proxy moves to it and v1's
	// copy is collected.
	auth := base64.StdEncoding.EncodeToString([]byte("puller:s3cret"))
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "regcred", Namespace: h.ns}, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"` + privateHost + `":{"auth":"` + auth + `"}}}`)}}
	if _, err := h.kube.CoreV1().Secrets(h.ns).Create(h.ctx(), secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	patchModule(map[string]any{"sha256": pin2}) // a new generation: handled again
	wantAccepted("True/Compiled", pin2)
	servesOnly(pin2)
	h.wantModuleCopy(pin2, "ingress", "site")
	testpoll.Until(t, settle, "v1's copy collected", func() error {
		for _, c := range chunks1 {
			if _, err := h.kube.CoreV1().Secrets(h.opNS).Get(h.ctx(), c, metav1.GetOptions{}); err == nil {
				return fmt.Errorf("%s still there", c)
			}
		}
		return nil
	})

	// Pull policy IfNotPresent: with the registry gone, a change of another
	// setting is accepted from the cluster's copy of the pinned digest.
	stopRegistry()
	stopPrivate()
	b, _ := json.Marshal(map[string]any{"spec": map[string]any{"order": 5}})
	if _, err := h.dyn.Resource(resources.RoutingPlugins).Namespace(h.ns).Patch(h.ctx(), "gate", types.MergePatchType, b, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	testpoll.Until(t, settle, "accepted from the cluster's copy", func() error {
		st, msg, obj := h.pluginCondition("gate", "Accepted")
		if g, _, _ := unstructured.NestedInt64(obj.Object, "status", "observedGeneration"); g != obj.GetGeneration() || st != "True/Compiled" || !strings.Contains(msg, "the cluster's copy of sha256 "+pin2) {
			return fmt.Errorf("generation %d/%d: %s %s", g, obj.GetGeneration(), st, msg)
		}
		return nil
	})
}
