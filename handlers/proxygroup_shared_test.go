package handlers_test

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tailplane/tailplane/handlers/lib/cluster"
	"github.com/tailplane/tailplane/handlers/lib/groupmember"
	"github.com/tailplane/tailplane/handlers/lib/tsservice"
	"github.com/tailplane/tailplane/internal/tailnet/tailnettest"
	"github.com/tailplane/tailplane/internal/testpoll"
)

// The same Ingress in another cluster: that cluster's operator adds itself
// to the Tailscale Service (as the official operator does). This cluster
// notices without any change of its own, names the other operator on the
// Ingress, and deleting its Ingress takes off only its own reference.
func TestProxyGroupMemberSharedWithAnotherCluster(t *testing.T) {
	h := newHarness(t, nil)
	h.stop()
	h.adjustDeps = func(d *cluster.Deps) { d.SharedServiceCheck = 200 * time.Millisecond }
	h.start()
	h.createIngressClass(false)
	h.backend("web", 80)
	g := h.proxyGroup(`{"type":"ingress","replicas":1}`)
	h.createIngress("multi", map[string]string{"tailscale.com/proxy-group": g.name},
		networkingv1.IngressSpec{DefaultBackend: defaultBackend("web", 80), TLS: tlsHost("multi")})
	mine := `{"ownerRefs":[{"operatorID":"` + operatorNodeID + `"}]}`
	h.wantTailscaleService("svc:multi", func(s tailnettest.Service) error {
		if got := s.Annotations[tsservice.AnnotationOwnerReferences]; got != mine {
			return fmt.Errorf("owner references %s, want the official shape %s", got, mine)
		}
		return nil
	})

	h.api.AddDevice(tailnettest.Device{ID: "nOTHER", Name: "tailscale-operator-1.tail1.ts.net", Hostname: "tailscale-operator-1"})
	svc := h.api.Services()["svc:multi"]
	svc.Annotations[tsservice.AnnotationOwnerReferences] = `{"ownerRefs":[{"operatorID":"` + operatorNodeID + `"},{"operatorID":"nOTHER"}]}`
	h.api.PutService(svc)
	h.wantEvent(h.ns, "multi", corev1.EventTypeNormal, groupmember.ReasonShared,
		"Tailscale Service svc:multi is also served by the operator of another cluster: tailscale-operator-1.tail1.ts.net (nOTHER)")

	if err := h.kube.NetworkingV1().Ingresses(h.ns).Delete(h.ctx(), "multi", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testpoll.Until(t, settle, "only this operator's reference taken off", func() error {
		s, ok := h.api.Services()["svc:multi"]
		if !ok {
			return fmt.Errorf("svc:multi deleted though another cluster still serves it")
		}
		if got := s.Annotations[tsservice.AnnotationOwnerReferences]; got != `{"ownerRefs":[{"operatorID":"nOTHER"}]}` {
			return fmt.Errorf("owner references %s", got)
		}
		if _, ok := s.Annotations[tsservice.AnnotationOwnerResources]; ok {
			return fmt.Errorf("this cluster's object still named: %v", s.Annotations)
		}
		return nil
	})
}
