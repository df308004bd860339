package handlers_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tailplane/tailplane/handlers/lib/resources"
	"github.com/tailplane/tailplane/handlers/lib/settings"
	"github.com/tailplane/tailplane/internal/testpoll"
)

func (h *harness) createProxyClass(name, image string) {
	h.t.Helper()
	pc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "tailscale.com/v1alpha1", "kind": "ProxyClass",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{"statefulSet": map[string]any{
			"labels": map[string]any{"team": "web"},
			"pod":    map[string]any{"tailscaleContainer": map[string]any{"image": image}},
		}},
	}}
	if _, err := h.dyn.Resource(resources.ProxyClasses).Create(h.ctx(), pc, metav1.CreateOptions{}); err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { _ = h.dyn.Resource(resources.ProxyClasses).Delete(h.ctx(), name, metav1.DeleteOptions{}) })
}

func (h *harness) proxyClassReady(name string) (string, string) {
	pc, err := h.dyn.Resource(resources.ProxyClasses).Get(h.ctx(), name, metav1.GetOptions{})
	if err != nil {
		return "", err.Error()
	}
	conds, _, _ := unstructured.NestedSlice(pc.Object, "status", "conditions")
	for _, c := range conds {
		m := c.(map[string]any)
		if m["type"] == "ProxyClassReady" {
			return fmt.Sprint(m["status"]), fmt.Sprint(m["reason"], ": ", m["message"])
		}
	}
	return "", "no condition"
}

// A Service naming a missing ProxyClass waits with a condition; the class is
// created invalid (bad image ref): ProxyClassReady False, an Event, and the
// Service still waits; fixed, the Service gets a proxy with the class applied.
func TestProxyClassGatesAndApplies(t *testing.T) {
	h := newHarness(t, nil)
	h.createService(exposed("classy", map[string]string{"tailscale.com/proxy-class": "pc-" + h.ns}))
	h.wantCondition("classy", "False", "ProxyPending", `the ProxyClass "pc-`+h.ns+`" does not exist`)

	h.createProxyClass("pc-"+h.ns, "registry.example.com/proxy:BAD TAG")
	testpoll.Until(t, settle, "ProxyClassReady False", func() error {
		if st, msg := h.proxyClassReady("pc-" + h.ns); st != "False" {
			return fmt.Errorf("%s %s", st, msg)
		}
		return nil
	})
	h.wantEvent("default", "pc-"+h.ns, corev1.EventTypeWarning, "ProxyClassInvalid", "ProxyClass is not valid")
	h.wantCondition("classy", "False", "ProxyPending", "is not yet in a ready state, waiting... (ProxyClassInvalid: ProxyClass is not valid")
	if err := h.proxyGone("svc", "classy"); err != nil {
		t.Fatal(err)
	}

	patch := `{"spec":{"statefulSet":{"pod":{"tailscaleContainer":{"image":"registry.example.com/proxy:v2"}}}}}`
	if _, err := h.dyn.Resource(resources.ProxyClasses).Patch(h.ctx(), "pc-"+h.ns, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	testpoll.Until(t, settle, "proxy with the class applied", func() error {
		sts, err := h.kube.AppsV1().StatefulSets(h.opNS).Get(h.ctx(), h.names("svc", "classy").Base, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if img := sts.Spec.Template.Spec.Containers[0].Image; img != "registry.example.com/proxy:v2" || sts.Labels["team"] != "web" || sts.Labels["tailscale.com/managed"] != "true" {
			return fmt.Errorf("image %s labels %v", img, sts.Labels)
		}
		return nil
	})
	h.wantCondition("classy", "False", "ProxyPending", "no Tailscale hostname known yet")
}

// The operator's ACME settings (PROXY_ACME_DIRECTORY_URL, PROXY_ACME_CA_FILE)
// reach the proxy's container through the pipeline, with a default
// ProxyClass that sets nothing: that class gets no CustomTSEnvVar Warning,
// which is about a ProxyClass's own TS_ env only (devcluster's default
// configuration is warning-free).
func TestOperatorACMEReachesProxiesWithoutWarning(t *testing.T) {
	h := newHarness(t, func(s *settings.Settings) {
		s.ProxyACME = settings.ACME{DirectoryURL: "https://127.0.0.1:14000/dir", CAFile: "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"}
		s.DefaultProxyClass = "plain-" + s.Namespace
	})
	class := "plain-" + h.opNS
	h.createClusterCR(resources.ProxyClasses, "ProxyClass", class, `{}`)
	h.createService(exposed("acme", nil))
	testpoll.Until(t, settle, "the proxy's ACME env", func() error {
		sts, err := h.kube.AppsV1().StatefulSets(h.opNS).Get(h.ctx(), h.names("svc", "acme").Base, metav1.GetOptions{})
		if err != nil {
			return err
		}
		env := map[string]string{}
		for _, e := range sts.Spec.Template.Spec.Containers[0].Env {
			env[e.Name] = e.Value
		}
		if env["TS_DEBUG_ACME_DIRECTORY_URL"] != "https://127.0.0.1:14000/dir" || env["SSL_CERT_FILE"] != "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt" {
			return fmt.Errorf("env %v", env)
		}
		return nil
	})
	if st, msg := h.proxyClassReady(class); st != "True" {
		t.Fatalf("ProxyClassReady %s %s", st, msg)
	}
	if n, msgs := h.events("default", class, corev1.EventTypeWarning, "CustomTSEnvVar"); n != 0 {
		t.Fatalf("%d CustomTSEnvVar Warnings on the default ProxyClass: %q", n, msgs)
	}
}
