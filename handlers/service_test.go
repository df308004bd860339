package handlers_test

import (
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tailplane/tailplane/internal/tailnet/tailnettest"
	"github.com/tailplane/tailplane/internal/testpoll"
	"github.com/tailplane/tailplane/proxy/config"
)

func exposed(name string, annotations map[string]string) *corev1.Service {
	ann := map[string]string{"tailscale.com/expose": "true"}
	for k, v := range annotations {
		ann[k] = v
	}
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: ann}}
}

func loadBalancer(name, class string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, LoadBalancerClass: &class}}
}

// An exposed Service gets a proxy with one minted key; the condition follows
// the proxy's state; the key leaves the config once the device exists; delete
// removes the device through the API, then the objects, then the finalizer.
func TestExposedServiceLifecycle(t *testing.T) {
	h := newHarness(t, nil)
	h.createService(exposed("web", nil))
	testpoll.Until(t, settle, "proxy objects", func() error { return h.proxyExists("svc", "web") })
	cfg, err := h.proxyConfig("svc", "web")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Role != config.RoleIngressL4 || cfg.Hostname != h.ns+"-web" || cfg.AuthKey == "" || cfg.LoginServer != h.api.URL {
		t.Fatalf("config: %+v", cfg)
	}
	if keys := h.api.Keys(); len(keys) != 1 || !slices.Equal(keys[0].Tags, []string{"tag:k8s"}) || !keys[0].Preauthorized || keys[0].Reusable || keys[0].Ephemeral {
		t.Fatalf("keys minted: %+v", keys)
	}
	h.wantCondition("web", "False", "ProxyPending", "no Tailscale hostname known yet")
	if svc := h.service("web"); !slices.Equal(svc.Finalizers, []string{"tailscale.com/finalizer"}) || len(svc.Annotations) != 1 {
		t.Fatalf("want the finalizer and only the user's annotation: %v %v", svc.Finalizers, svc.Annotations)
	}

	h.simulateLogin("svc", "web", "nWEB", h.ns+"-web.tail1.ts.net", "100.64.0.7", "fd7a:115c:a1e0::7")
	h.wantCondition("web", "True", "ProxyCreated", "ProxyCreated")
	testpoll.Until(t, settle, "auth key dropped from config", func() error {
		cfg, err := h.proxyConfig("svc", "web")
		if err != nil || cfg.AuthKey != "" {
			return fmt.Errorf("config %+v, %v", cfg, err)
		}
		return nil
	})
	if len(h.service("web").Status.LoadBalancer.Ingress) != 0 {
		t.Fatal("an exposed ClusterIP Service got LoadBalancer status")
	}

	if err := h.kube.CoreV1().Services(h.ns).Delete(h.ctx(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testpoll.Until(t, settle, "Service gone", func() error {
		_, err := h.kube.CoreV1().Services(h.ns).Get(h.ctx(), "web", metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there: %v", err)
		}
		return nil
	})
	if !slices.Contains(h.api.Deleted(), "nWEB") {
		t.Fatalf("device not deleted through the API: %v", h.api.Deleted())
	}
	testpoll.Until(t, settle, "proxy gone", func() error { return h.proxyGone("svc", "web") })
	if len(h.api.Keys()) != 1 {
		t.Fatalf("%d keys minted, want 1", len(h.api.Keys()))
	}
}

// A tailscale LoadBalancer gets status.loadBalancer.ingress: FQDN, then the
// IPv4 addresses (ClusterIP family).
func TestLoadBalancerStatus(t *testing.T) {
	h := newHarness(t, nil)
	h.createService(loadBalancer("lb", "tailscale"))
	testpoll.Until(t, settle, "proxy objects", func() error { return h.proxyExists("svc", "lb") })
	h.simulateLogin("svc", "lb", "nLB", h.ns+"-lb.tail1.ts.net", "100.64.0.8", "fd7a:115c:a1e0::8")
	testpoll.Until(t, settle, "LB status", func() error {
		got := h.service("lb").Status.LoadBalancer.Ingress
		if len(got) != 2 || got[0].Hostname != h.ns+"-lb.tail1.ts.net" || got[1].IP != "100.64.0.8" {
			return fmt.Errorf("got %+v", got)
		}
		return nil
	})
	h.wantCondition("lb", "True", "ProxyCreated", "")
}

// Services of another class, or LoadBalancers without class, are never
// touched: no proxy, no finalizer, no annotation, no status.
func TestOtherServicesUntouched(t *testing.T) {
	h := newHarness(t, nil)
	h.createService(loadBalancer("other", "example.com/lb"))
	h.createService(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "noclass"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer}})
	h.createService(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "plain"}})
	h.createService(exposed("marker", nil)) // proves the operator is running
	testpoll.Until(t, settle, "proxy of marker", func() error { return h.proxyExists("svc", "marker") })
	testpoll.Always(t, 2*1e9, "untouched", func() error {
		for _, name := range []string{"other", "noclass", "plain"} {
			svc := h.service(name)
			if len(svc.Finalizers) > 0 || len(svc.Annotations) > 0 || len(svc.Status.Conditions) > 0 {
				return fmt.Errorf("%s touched: %+v %+v", name, svc.ObjectMeta, svc.Status)
			}
			if err := h.proxyGone("svc", name); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
		return nil
	})
}

// Switching a Service from class tailscale to another class cleans up (device,
// objects, condition, finalizer); switching back serves it again.
func TestServiceSwitchedBetweenClasses(t *testing.T) {
	h := newHarness(t, nil)
	h.createService(loadBalancer("sw", "tailscale"))
	testpoll.Until(t, settle, "proxy objects", func() error { return h.proxyExists("svc", "sw") })
	h.simulateLogin("svc", "sw", "nSW", h.ns+"-sw.tail1.ts.net", "100.64.0.9")
	h.wantCondition("sw", "True", "ProxyCreated", "")

	// loadBalancerClass is immutable: switch by turning the Service into a
	// ClusterIP and back into a LoadBalancer of another class.
	h.patchService("sw", `{"spec":{"type":"ClusterIP","loadBalancerClass":null}}`)
	h.patchService("sw", `{"spec":{"type":"LoadBalancer","loadBalancerClass":"example.com/lb"}}`)
	testpoll.Until(t, settle, "cleaned up", func() error {
		svc := h.service("sw")
		if len(svc.Finalizers) > 0 || len(svc.Annotations) > 0 || len(svc.Status.Conditions) > 0 || len(svc.Status.LoadBalancer.Ingress) > 0 {
			return fmt.Errorf("left: %v %v %+v", svc.Finalizers, svc.Annotations, svc.Status)
		}
		if s := h.stateOf("services", "sw"); s != nil {
			return fmt.Errorf("state ConfigMap %s left", s.Name)
		}
		return h.proxyGone("svc", "sw")
	})
	if !slices.Contains(h.api.Deleted(), "nSW") {
		t.Fatalf("device not deleted: %v", h.api.Deleted())
	}
	h.patchService("sw", `{"spec":{"type":"ClusterIP","loadBalancerClass":null}}`)
	h.patchService("sw", `{"spec":{"type":"LoadBalancer","loadBalancerClass":"tailscale"}}`)
	testpoll.Until(t, settle, "served again", func() error { return h.proxyExists("svc", "sw") })
	if n := len(h.api.Keys()); n != 2 {
		t.Fatalf("%d keys, want 2 (one per proxy)", n)
	}
}

// Restarting the operator mid-way creates nothing twice: same objects, one key.
func TestRestartCreatesNothingTwice(t *testing.T) {
	h := newHarness(t, nil)
	h.createService(exposed("r1", nil))
	testpoll.Until(t, settle, "proxy r1", func() error { return h.proxyExists("svc", "r1") })
	sts, err := h.kube.AppsV1().StatefulSets(h.opNS).Get(h.ctx(), h.names("svc", "r1").Base, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h.stop()
	h.createService(exposed("r2", nil)) // created while the operator is down
	h.start()
	h.restart() // and once more, right away
	testpoll.Until(t, settle, "proxy r2", func() error { return h.proxyExists("svc", "r2") })
	h.wantCondition("r1", "False", "ProxyPending", "")
	after, err := h.kube.AppsV1().StatefulSets(h.opNS).Get(h.ctx(), sts.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.UID != sts.UID || after.Generation != sts.Generation {
		t.Fatalf("StatefulSet replaced or changed: uid %s->%s generation %d->%d", sts.UID, after.UID, sts.Generation, after.Generation)
	}
	if n := len(h.api.Keys()); n != 2 {
		t.Fatalf("%d keys minted for 2 proxies", n)
	}
	list, err := h.kube.AppsV1().StatefulSets(h.opNS).List(h.ctx(), metav1.ListOptions{})
	if err != nil || len(list.Items) != 2 {
		t.Fatalf("%d StatefulSets, %v", len(list.Items), err)
	}
}

// Bad input on one Service is reported on it and disturbs no other Service.
func TestInvalidServiceAnnotations(t *testing.T) {
	h := newHarness(t, nil)
	h.createService(exposed("badhost", map[string]string{"tailscale.com/hostname": "not_a_label"}))
	h.createService(exposed("badtags", map[string]string{"tailscale.com/tags": "k8s,tag:ok"}))
	h.createService(exposed("good", nil))
	headless := exposed("headless", nil)
	headless.Spec.ClusterIP = corev1.ClusterIPNone
	h.createService(headless)

	h.wantCondition("badhost", "False", "ProxyInvalid", `invalid Tailscale hostname specified "not_a_label"`)
	h.wantEvent(h.ns, "badhost", corev1.EventTypeWarning, "INVALIDSERVICE", "not_a_label")
	h.wantCondition("badtags", "False", "ProxyInvalid", `invalid tag "k8s": tags must start with 'tag:'`)
	h.wantEvent(h.ns, "badtags", corev1.EventTypeWarning, "INVALIDSERVICE", `invalid tag "k8s"`)
	h.wantCondition("headless", "False", "ProxyInvalid", "headless Services are not supported")
	h.wantEvent(h.ns, "headless", corev1.EventTypeWarning, "INVALIDSERVICE", "headless")
	testpoll.Until(t, settle, "good proxy", func() error { return h.proxyExists("svc", "good") })
	for _, name := range []string{"badhost", "badtags", "headless"} {
		if err := h.proxyGone("svc", name); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	// Fixing the annotation serves the Service.
	h.patchService("badhost", `{"metadata":{"annotations":{"tailscale.com/hostname":"fixed"}}}`)
	testpoll.Until(t, settle, "fixed proxy", func() error { return h.proxyExists("svc", "badhost") })
	h.wantCondition("badhost", "False", "ProxyPending", "")
}

// Two Services asking for one hostname: the first keeps it, the second is
// refused with a condition and an Event naming the first, and is served once
// the first lets the name go.
func TestHostnameCollision(t *testing.T) {
	h := newHarness(t, nil)
	h.createService(exposed("first", map[string]string{"tailscale.com/hostname": "shared"}))
	testpoll.Until(t, settle, "first proxy", func() error { return h.proxyExists("svc", "first") })
	h.createService(exposed("second", map[string]string{"tailscale.com/hostname": "shared"}))
	h.wantCondition("second", "False", "ProxyInvalid", `hostname "shared" is already used by Service `+h.ns+"/first")
	h.wantEvent(h.ns, "second", corev1.EventTypeWarning, "INVALIDSERVICE", "already used")
	if err := h.proxyGone("svc", "second"); err != nil {
		t.Fatal(err)
	}
	h.wantCondition("first", "False", "ProxyPending", "")
	h.patchService("first", `{"metadata":{"annotations":{"tailscale.com/hostname":"renamed"}}}`)
	testpoll.Until(t, settle, "first renamed", func() error {
		cfg, err := h.proxyConfig("svc", "first")
		if err != nil || cfg.Hostname != "renamed" {
			return fmt.Errorf("%+v %v", cfg, err)
		}
		return nil
	})
	// The name is free: the second Service gets it, without waiting for
	// its periodic retry.
	testpoll.Until(t, settle, "second served", func() error {
		cfg, err := h.proxyConfig("svc", "second")
		if err != nil || cfg.Hostname != "shared" {
			return fmt.Errorf("%+v %v", cfg, err)
		}
		return nil
	})
}

// The API refusing a key (quota, 429) leaves a clear condition and is
// retried with backoff until it succeeds.
func TestAPIQuotaIsRetried(t *testing.T) {
	h := newHarness(t, nil)
	h.api.Fail(tailnettest.EndpointKeys, tailnettest.Failure{Status: 429, Message: "auth key quota exceeded"})
	h.createService(exposed("quota", nil))
	h.wantCondition("quota", "False", "ProxyFailed", "auth key quota exceeded")
	h.wantEvent(h.ns, "quota", corev1.EventTypeWarning, "ProxyFailed", "auth key quota exceeded")
	if err := h.proxyGone("svc", "quota"); err != nil {
		t.Fatal(err)
	}
	h.api.Recover(tailnettest.EndpointKeys)
	testpoll.Until(t, settle, "proxy after recovery", func() error { return h.proxyExists("svc", "quota") })
	h.wantCondition("quota", "False", "ProxyPending", "")
}

// The operator does its whole job with the least-privilege RBAC of
// deploy/manifests: proxy objects, status, Events, finalizers, cleanup.
func TestWorksWithManifestRBAC(t *testing.T) {
	h := newHarnessOpts(t, true, nil)
	h.createService(loadBalancer("rbac", "tailscale"))
	testpoll.Until(t, settle, "proxy objects", func() error { return h.proxyExists("svc", "rbac") })
	h.simulateLogin("svc", "rbac", "nRBAC", h.ns+"-rbac.tail1.ts.net", "100.64.0.11")
	h.wantCondition("rbac", "True", "ProxyCreated", "")
	testpoll.Until(t, settle, "LB status", func() error {
		if lb := h.service("rbac").Status.LoadBalancer.Ingress; len(lb) != 2 {
			return fmt.Errorf("status %+v", lb)
		}
		return nil
	})
	// The proxy's Pod, as the StatefulSet controller would make it (this
	// API server runs none): a removed proxy's Pods are deleted at once.
	sts, err := h.kube.AppsV1().StatefulSets(h.opNS).Get(h.ctx(), h.names("svc", "rbac").Base, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: sts.Name + "-0", Namespace: h.opNS, Labels: sts.Spec.Template.Labels},
		Spec: sts.Spec.Template.Spec}
	if _, err := h.kube.CoreV1().Pods(h.opNS).Create(h.ctx(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := h.kube.CoreV1().Services(h.ns).Delete(h.ctx(), "rbac", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testpoll.Until(t, settle, "proxy gone", func() error { return h.proxyGone("svc", "rbac") })
	if !slices.Contains(h.api.Deleted(), "nRBAC") {
		t.Fatalf("device not deleted: %v", h.api.Deleted())
	}
	testpoll.Until(t, settle, "the removed proxy's Pod deleted", func() error {
		if _, err := h.kube.CoreV1().Pods(h.opNS).Get(h.ctx(), pod.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%v)", err)
		}
		return nil
	})
}

// A proxy that refuses its config (it writes config_error into its state)
// shows up in the Service's condition.
func TestProxyConfigErrorShown(t *testing.T) {
	h := newHarness(t, nil)
	h.createService(exposed("cfgerr", nil))
	testpoll.Until(t, settle, "proxy", func() error { return h.proxyExists("svc", "cfgerr") })
	patch := `{"stringData":{"config_error":"l4.ports[0].target: bad address"}}`
	if _, err := h.kube.CoreV1().Secrets(h.opNS).Patch(h.ctx(), h.names("svc", "cfgerr").StateSecret, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	h.wantCondition("cfgerr", "False", "ProxyFailed", "the proxy refused its config: l4.ports[0].target: bad address")
}
