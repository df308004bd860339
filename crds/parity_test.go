package crds_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/tailplane/tailplane/crds"
	"github.com/tailplane/tailplane/internal/testenv"
)

// officialKinds are the official operator's eight kinds, by CRD file.
var officialKinds = []struct{ file, kind, resource string }{
	{"tailscale.com_connectors.yaml", "Connector", "connectors"},
	{"tailscale.com_proxyclasses.yaml", "ProxyClass", "proxyclasses"},
	{"tailscale.com_proxygroups.yaml", "ProxyGroup", "proxygroups"},
	{"tailscale.com_dnsconfigs.yaml", "DNSConfig", "dnsconfigs"},
	{"tailscale.com_recorders.yaml", "Recorder", "recorders"},
	{"tailscale.com_tailnets.yaml", "Tailnet", "tailnets"},
	{"tailscale.com_proxygrouppolicies.yaml", "ProxyGroupPolicy", "proxygrouppolicies"},
	{"tailscale.com_peerrelays.yaml", "PeerRelay", "peerrelays"},
}

// officialCRDs reads the official operator's CRDs from the tailscale.com
// module that go.mod pins (cmd/k8s-operator/deploy/crds).
func officialCRDs(t *testing.T) map[string]*unstructured.Unstructured {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "tailscale.com").Output()
	if err != nil {
		t.Fatalf("locate the tailscale.com module: %v", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "cmd", "k8s-operator", "deploy", "crds")
	crds := map[string]*unstructured.Unstructured{}
	for _, k := range officialKinds {
		b, err := os.ReadFile(filepath.Join(dir, k.file))
		if err != nil {
			t.Fatal(err)
		}
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(b, &obj.Object); err != nil {
			t.Fatalf("%s: %v", k.file, err)
		}
		crds[k.file] = obj
	}
	return crds
}

// ourCRDs returns crds/'s CRDs by file name, failing if one of the eight is
// missing.
func ourCRDs(t *testing.T) map[string]*unstructured.Unstructured {
	t.Helper()
	objs, err := crds.Objects()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		byName[o.GetName()] = o
	}
	out := map[string]*unstructured.Unstructured{}
	for _, k := range officialKinds {
		o, ok := byName[k.resource+".tailscale.com"]
		if !ok {
			t.Fatalf("crds/ has no CRD %s.tailscale.com", k.resource)
		}
		out[k.file] = o
	}
	return out
}

// replaceCRDs deletes the installed CRDs of the eight kinds, waits until they
// are gone (so that no handler of the old schema serves), then installs set.
func replaceCRDs(t *testing.T, dyn dynamic.Interface, set map[string]*unstructured.Unstructured) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client := dyn.Resource(testenv.CRDResource)
	var objs []*unstructured.Unstructured
	for _, k := range officialKinds {
		obj := set[k.file].DeepCopy()
		obj.SetResourceVersion("")
		objs = append(objs, obj)
		// A CRD deleted while its storage is still initializing stays
		// Terminating ("could not list instances: storage is (re)initializing")
		// until a slow retry: wait until its objects can be listed.
		gvr := schema.GroupVersionResource{Group: "tailscale.com", Version: "v1alpha1", Resource: k.resource}
		err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			_, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
			return err == nil, nil
		})
		if err != nil {
			t.Fatalf("list %s: %v", k.resource, err)
		}
		if err := client.Delete(ctx, obj.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	for _, obj := range objs {
		var last *unstructured.Unstructured
		err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			cur, err := client.Get(ctx, obj.GetName(), metav1.GetOptions{})
			last = cur
			return apierrors.IsNotFound(err), nil
		})
		if err != nil {
			status, _, _ := unstructured.NestedFieldNoCopy(last.Object, "status")
			t.Fatalf("CRD %s not deleted: %v; finalizers %v, status %v", obj.GetName(), err, last.GetFinalizers(), status)
		}
	}
	if err := testenv.InstallCRDs(ctx, dyn, objs...); err != nil {
		t.Fatal(err)
	}
}

// sample is one object sent to both CRDs. With update set, the object is
// created (it must be valid), then update changes its spec and the update's
// outcome is compared.
type sample struct {
	name   string
	kind   string
	ns     bool // namespaced (ProxyGroupPolicy)
	spec   map[string]any
	update map[string]any
	// want, when set, is text the official CRD's refusal must contain: the
	// sample is meant to hit that rule.
	want string
}

// outcome is what the API server made of a sample: its refusal, or the
// stored spec (after defaulting and pruning).
type outcome struct {
	Refused string `json:"refused,omitempty"`
	Stored  string `json:"stored,omitempty"`
}

func (s sample) resource() schema.GroupVersionResource {
	for _, k := range officialKinds {
		if k.kind == s.kind {
			return schema.GroupVersionResource{Group: "tailscale.com", Version: "v1alpha1", Resource: k.resource}
		}
	}
	panic("unknown kind " + s.kind)
}

func run(t *testing.T, dyn dynamic.Interface, ns string, samples []sample) map[string]outcome {
	t.Helper()
	ctx := context.Background()
	got := map[string]outcome{}
	for _, s := range samples {
		obj := object(s.kind, "parity-"+s.name, s.spec)
		var client dynamic.ResourceInterface = dyn.Resource(s.resource())
		if s.ns {
			client = dyn.Resource(s.resource()).Namespace(ns)
			obj.SetNamespace(ns)
		}
		created, err := client.Create(ctx, obj, metav1.CreateOptions{})
		if err == nil && s.update != nil {
			changed := created.DeepCopy()
			for k, v := range s.update {
				_ = unstructured.SetNestedField(changed.Object, v, "spec", k)
			}
			created, err = client.Update(ctx, changed, metav1.UpdateOptions{})
		}
		if err != nil {
			got[s.name] = outcome{Refused: err.Error()}
		} else {
			spec, _, _ := unstructured.NestedMap(created.Object, "spec")
			b, _ := json.Marshal(spec)
			got[s.name] = outcome{Stored: string(b)}
		}
		if err := client.Delete(ctx, obj.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("delete %s: %v", obj.GetName(), err)
		}
	}
	return got
}

// Every official kind is installed, and on a real API server each of our
// CRDs gives the same verdict as the official CRD file on the same objects:
// accepted with the same stored spec (defaults, pruning), or refused with
// the same message (each official CEL rule, patterns, enums, bounds).
func TestSchemaParityWithOfficialCRDs(t *testing.T) {
	dyn := dynamicClient(t)
	ns := env.Namespace(t)
	samples := paritySamples()

	replaceCRDs(t, dyn, officialCRDs(t))
	official := run(t, dyn, ns, samples)
	replaceCRDs(t, dyn, ourCRDs(t))
	ours := run(t, dyn, ns, samples)

	accepted, refused := 0, 0
	for _, s := range samples {
		o, g := official[s.name], ours[s.name]
		if o != g {
			t.Errorf("%s %s:\n official: %+v\n     ours: %+v", s.kind, s.name, o, g)
		}
		if s.want != "" && !strings.Contains(o.Refused, s.want) {
			t.Errorf("%s %s: the official CRD gave %+v, want a refusal with %q", s.kind, s.name, o, s.want)
		}
		if o.Refused != "" {
			refused++
		} else {
			accepted++
		}
	}
	t.Logf("%d samples: the official CRDs accepted %d and refused %d", len(samples), accepted, refused)
	// The samples must exercise both sides; a typo that makes every sample
	// refused (or accepted) by both CRDs would prove nothing.
	if accepted < 15 || refused < 25 {
		t.Errorf("official CRDs accepted %d and refused %d samples; the samples no longer cover both sides", accepted, refused)
	}
}
