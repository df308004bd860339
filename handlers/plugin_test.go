package handlers_test

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tailplane/tailplane/handlers/lib/resources"
	"github.com/tailplane/tailplane/handlers/plugin"
	"github.com/tailplane/tailplane/internal/proxystate"
	"github.com/tailplane/tailplane/internal/testpoll"
	"github.com/tailplane/tailplane/plugins"
	"github.com/tailplane/tailplane/plugins/source"
)

// canaryModule builds the canary example plugin (a Go wasip1 guest).
func canaryModule(t *testing.T) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "canary.wasm")
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-trimpath", "-o", out, "github.com/tailplane/tailplane/plugins/examples/canary")
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build canary plugin: %v\n%s", err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func gz(b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	_, _ = w.Write(b)
	_ = w.Close()
	return buf.Bytes()
}

func (h *harness) routingPlugin(name, configMap, pin string, capabilities ...any) {
	h.t.Helper()
	rp := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "tailplane.dev/v1alpha1", "kind": "RoutingPlugin",
		"metadata": map[string]any{"name": name, "namespace": h.ns},
		"spec": map[string]any{
			"module":       map[string]any{"configMapKeyRef": map[string]any{"name": configMap, "key": "module.wasm.gz"}, "sha256": pin},
			"config":       map[string]any{"header": "X-Canary", "headerValue": "always"},
			"capabilities": capabilities,
			"targets":      map[string]any{"targetRefs": []any{map[string]any{"kind": "Ingress", "name": "site"}}},
		},
	}}
	if _, err := h.dyn.Resource(resources.RoutingPlugins).Namespace(h.ns).Create(h.ctx(), rp, metav1.CreateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) pluginCondition(name, typ string) (string, string, *unstructured.Unstructured) {
	rp, err := h.dyn.Resource(resources.RoutingPlugins).Namespace(h.ns).Get(h.ctx(), name, metav1.GetOptions{})
	if err != nil {
		return "", err.Error(), nil
	}
	conds, _, _ := unstructured.NestedSlice(rp.Object, "status", "conditions")
	for _, c := range conds {
		m := c.(map[string]any)
		if m["type"] == typ {
			return fmt.Sprint(m["status"], "/", m["reason"]), fmt.Sprint(m["message"]), rp
		}
	}
	return "", "no condition", rp
}

// A RoutingPlugin is compiled (Accepted, sha256, size), copied into the
// operator namespace and put into its target's proxy config (readable by
// that proxy's Role); Ready follows what the proxy reports. A plugin whose
// module needs an ungranted capability, or whose pin is wrong, is refused
// with the reason and never reaches a proxy.
func TestRoutingPlugin(t *testing.T) {
	h, mod, pin := canarySite(t)

	h.routingPlugin("nocap", "canary", pin) // canary imports route functions
	h.routingPlugin("badpin", "canary", "0000000000000000000000000000000000000000000000000000000000000000", "route")
	h.routingPlugin("canary", "canary", pin, "route")
	testpoll.Until(t, settle, "canary accepted", func() error {
		st, msg, rp := h.pluginCondition("canary", "Accepted")
		if st != "True/Compiled" {
			return fmt.Errorf("%s %s", st, msg)
		}
		if s, _, _ := unstructured.NestedString(rp.Object, "status", "sha256"); s != pin {
			return fmt.Errorf("sha256 %q", s)
		}
		if n, _, _ := unstructured.NestedInt64(rp.Object, "status", "size"); n != int64(len(mod)) {
			return fmt.Errorf("size %d, want %d", n, len(mod))
		}
		return nil
	})
	for name, want := range map[string]string{"nocap": "False/CompileFailed", "badpin": "False/SHA256Mismatch"} {
		testpoll.Until(t, settle, name+" refused", func() error {
			if st, msg, _ := h.pluginCondition(name, "Accepted"); st != want {
				return fmt.Errorf("%s %s", st, msg)
			}
			return nil
		})
	}
	h.wantEvent(h.ns, "nocap", corev1.EventTypeWarning, "CompileFailed", "capability")

	testpoll.Until(t, settle, "plugin in the proxy config", func() error {
		cfg, err := h.proxyConfig("ingress", "site")
		if err != nil {
			return err
		}
		if len(cfg.Plugins) != 1 || cfg.Plugins[0].Name != h.ns+"/canary" {
			return fmt.Errorf("plugins %+v", cfg.Plugins)
		}
		// The proxy reads the entry as a RoutingPlugin spec whose module is
		// the copy in its own namespace.
		obj := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"namespace": h.opNS, "name": "canary"}}}
		var spec map[string]any
		if err := json.Unmarshal(cfg.Plugins[0].Spec, &spec); err != nil {
			return err
		}
		obj.Object["spec"] = spec
		ps, err := plugins.SpecFromRoutingPlugin(obj)
		if err != nil {
			return err
		}
		if ps.Source.SHA256 != pin || ps.Source.Kind != "Secret" || ps.Source.Namespace != h.opNS || ps.Source.Key != plugin.ModuleKey ||
			!slices.Equal(ps.Source.Chunks, plugin.ChunkNames(pin, len(ps.Source.Chunks))) || len(ps.Source.Chunks) == 0 {
			return fmt.Errorf("spec %+v", ps.Source)
		}
		return nil
	})
	h.wantModuleCopy(pin, "ingress", "site")

	// The proxy reports the plugin loaded: Ready and loadedBy follow.
	report, _ := json.Marshal([]proxystate.PluginReport{{Name: h.ns + "/canary", Loaded: true, SHA256: pin}})
	patch, _ := json.Marshal(map[string]any{"data": map[string][]byte{proxystate.KeyPluginStatus: report}})
	if _, err := h.kube.CoreV1().Secrets(h.opNS).Patch(h.ctx(), h.names("ingress", "site").StateSecret, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	testpoll.Until(t, settle, "Ready", func() error {
		st, msg, rp := h.pluginCondition("canary", "Ready")
		if st != "True/Loaded" {
			return fmt.Errorf("%s %s", st, msg)
		}
		if lb, _, _ := unstructured.NestedSlice(rp.Object, "status", "loadedBy"); len(lb) != 1 {
			return fmt.Errorf("loadedBy %v", lb)
		}
		return nil
	})

	// A new module: status must not say Ready/Loaded next to the new
	// sha256 while the proxy still reports the old one.
	mod2 := append(slices.Clone(mod), 0x00, 0x05, 0x03, 'n', 'e', 'w', 1) // a custom section: same code, new digest
	sum2 := sha256.Sum256(mod2)
	pin2 := hex.EncodeToString(sum2[:])
	cm, err := h.kube.CoreV1().ConfigMaps(h.ns).Get(h.ctx(), "canary", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.BinaryData["module.wasm.gz"] = gz(mod2)
	if _, err := h.kube.CoreV1().ConfigMaps(h.ns).Update(h.ctx(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	pinPatch, _ := json.Marshal(map[string]any{"spec": map[string]any{"module": map[string]any{"sha256": pin2}}})
	if _, err := h.dyn.Resource(resources.RoutingPlugins).Namespace(h.ns).Patch(h.ctx(), "canary", types.MergePatchType, pinPatch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	testpoll.Until(t, settle, "the new module accepted", func() error {
		st, msg, rp := h.pluginCondition("canary", "Ready")
		sha, _, _ := unstructured.NestedString(rp.Object, "status", "sha256")
		if sha != pin2 {
			ast, amsg, _ := h.pluginCondition("canary", "Accepted")
			return fmt.Errorf("sha256 %s (Accepted %s: %s)", sha, ast, amsg)
		}
		if st != "False/WaitingForProxies" {
			t.Fatalf("Ready = %s (%s) with the new sha256 while the proxy reports the old one", st, msg)
		}
		lb, _, _ := unstructured.NestedSlice(rp.Object, "status", "loadedBy")
		if len(lb) != 1 || lb[0].(map[string]any)["sha256"] != pin {
			t.Fatalf("loadedBy %v, want the proxy with the old sha256", lb)
		}
		return nil
	})
	proxyName := h.names("ingress", "site").StateSecret
	reportPlugin := func(r proxystate.PluginReport) {
		t.Helper()
		report, _ := json.Marshal([]proxystate.PluginReport{r})
		patch, _ := json.Marshal(map[string]any{"data": map[string][]byte{proxystate.KeyPluginStatus: report}})
		if _, err := h.kube.CoreV1().Secrets(h.opNS).Patch(h.ctx(), proxyName, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// loadedBy is what each proxy runs: the proxy failed to load the new
	// module and still runs the old one, so status names it with the old
	// digest and its error.
	reportPlugin(proxystate.PluginReport{Name: h.ns + "/canary", Loaded: true, SHA256: pin, Error: "compile: out of memory"})
	testpoll.Until(t, settle, "the proxy still on the old module", func() error {
		st, msg, rp := h.pluginCondition("canary", "Ready")
		lb, _, _ := unstructured.NestedSlice(rp.Object, "status", "loadedBy")
		if st != "False/LoadFailed" || len(lb) != 1 {
			return fmt.Errorf("Ready %s (%s), loadedBy %v", st, msg, lb)
		}
		if e := lb[0].(map[string]any); e["proxy"] != proxyName || e["sha256"] != pin || e["error"] != "compile: out of memory" {
			return fmt.Errorf("loadedBy %v, want %s running %s with its error", lb, proxyName, pin)
		}
		return nil
	})
	reportPlugin(proxystate.PluginReport{Name: h.ns + "/canary", Loaded: true, SHA256: pin2})
	testpoll.Until(t, settle, "Ready with the new module", func() error {
		st, msg, rp := h.pluginCondition("canary", "Ready")
		if st != "True/Loaded" {
			return fmt.Errorf("%s %s", st, msg)
		}
		lb, _, _ := unstructured.NestedSlice(rp.Object, "status", "loadedBy")
		if len(lb) != 1 || lb[0].(map[string]any)["proxy"] != proxyName || lb[0].(map[string]any)["sha256"] != pin2 || lb[0].(map[string]any)["error"] != nil {
			return fmt.Errorf("loadedBy %v, want %s running %s", lb, proxyName, pin2)
		}
		return nil
	})

	// Deleting the plugin removes it from the proxy and deletes the copy.
	if err := h.dyn.Resource(resources.RoutingPlugins).Namespace(h.ns).Delete(h.ctx(), "canary", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testpoll.Until(t, settle, "plugin removed from the proxy", func() error {
		cfg, err := h.proxyConfig("ingress", "site")
		if err != nil || len(cfg.Plugins) != 0 {
			return fmt.Errorf("plugins %+v %v", cfg.Plugins, err)
		}
		if _, err := h.kube.CoreV1().Secrets(h.opNS).Get(h.ctx(), plugin.ChunkNames(pin2, 1)[0], metav1.GetOptions{}); err == nil {
			return fmt.Errorf("module copy still there")
		}
		return nil
	})
}

// wantModuleCopy checks that the operator namespace holds the complete copy
// of the module with digest sum (its chunks verify against the pin) and
// that the Role of the proxy of kind/name may read every chunk by name.
func (h *harness) wantModuleCopy(sum, kind, name string) []string {
	h.t.Helper()
	first, err := h.kube.CoreV1().Secrets(h.opNS).Get(h.ctx(), plugin.ChunkNames(sum, 1)[0], metav1.GetOptions{})
	if err != nil {
		h.t.Fatalf("module copy of %s: %v", sum, err)
	}
	n, _ := strconv.Atoi(first.Annotations[plugin.AnnotationChunks])
	chunks := plugin.ChunkNames(sum, n)
	ref := source.Ref{Kind: source.Secret, Namespace: h.opNS, Name: chunks[0], Key: plugin.ModuleKey, SHA256: sum, Chunks: chunks}
	if _, _, err := source.Fetch(h.ctx(), h.kube, ref); err != nil {
		h.t.Fatalf("module copy of %s does not verify: %v", sum, err)
	}
	role, err := h.kube.RbacV1().Roles(h.opNS).Get(h.ctx(), h.names(kind, name).Base, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	for _, c := range chunks {
		if !slices.Contains(role.Rules[0].ResourceNames, c) {
			h.t.Fatalf("proxy Role cannot read chunk %s: %+v", c, role.Rules)
		}
	}
	return chunks
}

// A RoutingPlugin applied before the ConfigMap holding its module (kubectl
// apply -f of a folder applies in name order) is refused with
// SourceNotFound, then accepted once the ConfigMap exists, with no change to
// the plugin: the operator looks for the source again (it may only get
// ConfigMaps by name, not watch them).
func TestRoutingPluginSourceCreatedAfterThePlugin(t *testing.T) {
	mod := canaryModule(t)
	sum := sha256.Sum256(mod)
	pin := hex.EncodeToString(sum[:])
	h := newHarness(t, nil)
	h.routingPlugin("late", "late-module", pin, "route")
	testpoll.Until(t, settle, "refused while the ConfigMap is missing", func() error {
		if st, msg, _ := h.pluginCondition("late", "Accepted"); st != "False/SourceNotFound" {
			return fmt.Errorf("%s %s", st, msg)
		}
		return nil
	})
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "late-module", Namespace: h.ns}, BinaryData: map[string][]byte{"module.wasm.gz": gz(mod)}}
	if _, err := h.kube.CoreV1().ConfigMaps(h.ns).Create(h.ctx(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testpoll.Until(t, settle, "accepted once the ConfigMap exists", func() error {
		if st, msg, _ := h.pluginCondition("late", "Accepted"); st != "True/Compiled" {
			return fmt.Errorf("%s %s", st, msg)
		}
		return nil
	})
}

// canarySite is a harness with an Ingress "site" whose proxy exists, and
// the canary module in ConfigMap "canary" of the test namespace; it
// returns the module and its sha256 pin.
func canarySite(t *testing.T) (h *harness, mod []byte, pin string) {
	t.Helper()
	mod = canaryModule(t)
	sum := sha256.Sum256(mod)
	pin = hex.EncodeToString(sum[:])
	h = newHarness(t, nil)
	h.createIngressClass(false)
	h.backend("web", 80)
	h.createIngress("site", nil, networkingv1.IngressSpec{DefaultBackend: defaultBackend("web", 80)})
	testpoll.Until(t, settle, "proxy", func() error { return h.proxyExists("ingress", "site") })
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "canary", Namespace: h.ns}, BinaryData: map[string][]byte{"module.wasm.gz": gz(mod)}}
	if _, err := h.kube.CoreV1().ConfigMaps(h.ns).Create(h.ctx(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return h, mod, pin
}
