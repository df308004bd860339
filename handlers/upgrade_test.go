package handlers_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tailplane/tailplane/handlers/lib/cluster"
	"github.com/tailplane/tailplane/handlers/lib/pipeline"
	"github.com/tailplane/tailplane/handlers/lib/resources"
	"github.com/tailplane/tailplane/internal/testpoll"
	"github.com/tailplane/tailplane/runtime"
)

// oldObject is a parent as the previous release left it: see asOldRelease.
type oldObject struct {
	res        schema.GroupVersionResource
	parentType string
	name, role string
}

// asOldRelease turns parents the (stopped) operator handled into what the
// previous release left (git show 2f4b9c6:runtime/state.go and
// 2f4b9c6:handlers/kit/proxy.go): no state ConfigMap, the runtime's record
// in the annotation runtime.tailplane.io/last-handled, the mark
// tailplane.dev/proxy: <role> on the parent, and no role label on the
// proxy's state Secret. The record is written by a runtime storing its state
// as that release did (annotations under its default prefix) whose one
// handler sets the mark in the cycle's patch, as that release's handlers
// did: so the record hashes the parent, mark included, the way that release
// did.
func (h *harness) asOldRelease(objs ...oldObject) {
	h.t.Helper()
	op, err := runtime.New(env.Config(h.t), runtime.Settings{HealthAddress: "-", MetricsAddress: "-",
		Logger: runtime.NewLogger(testLogWriter(), false)})
	if err != nil {
		h.t.Fatal(err)
	}
	for _, o := range objs {
		if cm := h.stateOf(o.res.Resource, o.name); cm != nil {
			if err := h.kube.CoreV1().ConfigMaps(h.opNS).Delete(h.ctx(), cm.Name, metav1.DeleteOptions{}); err != nil {
				h.t.Fatal(err)
			}
		}
		unlabel := fmt.Appendf(nil, `{"metadata":{"labels":{%q:null}}}`, cluster.LabelProxyRole)
		if _, err := h.kube.CoreV1().Secrets(h.opNS).Patch(h.ctx(), h.names(o.parentType, o.name).StateSecret, types.MergePatchType, unlabel, metav1.PatchOptions{}); err != nil {
			h.t.Fatal(err)
		}
		mark := func(_ context.Context, ev *runtime.Event) (any, error) {
			ev.Patch.SetAnnotation(pipeline.LegacyMark, o.role)
			return nil, nil
		}
		if err := op.On(o.res, "old-"+o.name, mark, runtime.Namespace(h.ns), runtime.Causes(runtime.CauseCreate),
			runtime.When(func(obj *unstructured.Unstructured) bool { return obj.GetName() == o.name })); err != nil {
			h.t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- op.Run(ctx) }()
	testpoll.Until(h.t, settle, "old release's annotations", func() error {
		for _, o := range objs {
			obj, err := h.dyn.Resource(o.res).Namespace(h.ns).Get(h.ctx(), o.name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if a := obj.GetAnnotations(); a["runtime.tailplane.io/last-handled"] == "" || a[pipeline.LegacyMark] != o.role {
				return fmt.Errorf("%s: %v", o.name, a)
			}
		}
		return nil
	})
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		h.t.Fatal(err)
	}
}

// A Service and an Ingress handled by the previous release (state in
// annotations on them, the proxy mark, an unlabelled state Secret) are
// resumed after the upgrade, not created again: no new auth key, no device
// deleted, and the old annotations are removed from them, once. The
// operator runs with the chart's RBAC.
func TestUpgradeResumesOldReleaseParents(t *testing.T) {
	h := newHarnessOpts(t, true, nil)
	h.backend("web", 8080)
	h.createService(exposed("old", nil))
	h.createIngress("site", nil, networkingv1.IngressSpec{DefaultBackend: defaultBackend("web", 8080)})
	testpoll.Until(t, settle, "proxies", func() error {
		return errors.Join(h.proxyExists("svc", "old"), h.proxyExists("ingress", "site"))
	})
	h.simulateLogin("svc", "old", "nOLD", h.ns+"-old.tail1.ts.net", "100.64.0.30")
	h.simulateLogin("ingress", "site", "nSITE", h.ns+"-site.tail1.ts.net", "100.64.0.31")
	h.wantCondition("old", "True", "ProxyCreated", "ProxyCreated")
	h.stop()
	h.asOldRelease(oldObject{resources.Services, "svc", "old", cluster.RoleIngressL4}, oldObject{resources.Ingresses, "ingress", "site", cluster.RoleIngressL7})
	keys := len(h.api.Keys())

	h.start()
	h.wantEvent(h.ns, "old", corev1.EventTypeNormal, "Handled", `"service-sync" succeeded (resume)`)
	h.wantEvent(h.ns, "site", corev1.EventTypeNormal, "Handled", `"ingress-sync" succeeded (resume)`)
	migrated := func() error {
		svc := h.service("old")
		if !maps.Equal(svc.Annotations, map[string]string{"tailscale.com/expose": "true"}) || !slices.Equal(svc.Finalizers, []string{"tailscale.com/finalizer"}) {
			return fmt.Errorf("Service: annotations %v, finalizers %v", svc.Annotations, svc.Finalizers)
		}
		ing, err := h.kube.NetworkingV1().Ingresses(h.ns).Get(h.ctx(), "site", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(ing.Annotations) > 0 {
			return fmt.Errorf("Ingress: annotations %v", ing.Annotations)
		}
		for _, o := range []struct{ res, parentType, name, role string }{{"services", "svc", "old", cluster.RoleIngressL4}, {"ingresses", "ingress", "site", cluster.RoleIngressL7}} {
			if s := h.stateOf(o.res, o.name); s == nil || s.Data["last-handled"] == "" {
				return fmt.Errorf("no state ConfigMap for %s: %+v", o.name, s)
			}
			st, err := h.kube.CoreV1().Secrets(h.opNS).Get(h.ctx(), h.names(o.parentType, o.name).StateSecret, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if st.Labels[cluster.LabelProxyRole] != o.role {
				return fmt.Errorf("state Secret of %s: labels %v", o.name, st.Labels)
			}
		}
		return nil
	}
	testpoll.Until(t, settle, "old annotations moved into the operator namespace", migrated)
	// The record written then hashes the Service without the mark: its
	// removal is no update.
	testpoll.Always(t, 2*time.Second, "no update", func() error {
		list, err := h.kube.CoreV1().Events(h.ns).List(h.ctx(), metav1.ListOptions{FieldSelector: "involvedObject.name=old"})
		if err != nil {
			return err
		}
		for _, e := range list.Items {
			if strings.Contains(e.Message, "(update)") {
				return errors.New(e.Message)
			}
		}
		return nil
	})
	if n := len(h.api.Keys()); n != keys || len(h.api.Deleted()) > 0 {
		t.Fatalf("auth keys minted %d -> %d, devices deleted %v", keys, n, h.api.Deleted())
	}
	if err := h.proxyExists("svc", "old"); err != nil {
		t.Fatal(err)
	}
	h.wantCondition("old", "True", "ProxyCreated", "ProxyCreated")
}

// A Service the previous release gave a proxy, that stopped asking for one
// before the upgrade (its state Secret without role label, only the mark
// tells it has a proxy), gets its cleanup: proxy and device deleted,
// finalizer and old annotations removed.
func TestUpgradeCleansUpOldReleaseParent(t *testing.T) {
	h := newHarness(t, nil)
	h.exposedOnline("left", "nLEFT", "100.64.0.32")
	h.stop()
	h.asOldRelease(oldObject{resources.Services, "svc", "left", cluster.RoleIngressL4})
	h.patchService("left", `{"metadata":{"annotations":{"tailscale.com/expose":null}}}`)

	h.start()
	testpoll.Until(t, settle, "cleanup", func() error {
		if err := h.proxyGone("svc", "left"); err != nil {
			return err
		}
		if !slices.Contains(h.api.Deleted(), "nLEFT") {
			return fmt.Errorf("device not deleted: %v", h.api.Deleted())
		}
		svc := h.service("left")
		if len(svc.Annotations) > 0 || len(svc.Finalizers) > 0 || h.condition("left") != nil {
			return fmt.Errorf("Service: annotations %v, finalizers %v, conditions %v", svc.Annotations, svc.Finalizers, svc.Status.Conditions)
		}
		if s := h.stateOf("services", "left"); s != nil {
			return fmt.Errorf("state ConfigMap %s left", s.Name)
		}
		return nil
	})
}
