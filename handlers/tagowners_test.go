package handlers_test

import (
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/tailplane/tailplane/crds/tailscale/v1alpha1"
	"github.com/tailplane/tailplane/handlers/ingress"
	"github.com/tailplane/tailplane/internal/tailnet/tailnettest"
	"github.com/tailplane/tailplane/internal/testpoll"
)

// refusedTags is the Tailscale API's answer to an OAuth client whose tags
// do not own the tags it asks an auth key for (tagOwners).
const refusedTags = "requested tags [tag:k8s] are invalid or not permitted"

// The API refusing the proxy's tags (HTTP 400, the official text) shows on
// the Service as its condition and a Warning Event, on an Ingress as a
// Warning Event and on a ProxyGroup as its condition, each with the API's
// words and what to change in tagOwners; it is not retried in a loop: no
// second key is asked for within the next seconds.
func TestRefusedTagsAreExplained(t *testing.T) {
	h := newHarness(t, nil)
	h.api.Fail(tailnettest.EndpointKeys, tailnettest.Failure{Status: http.StatusBadRequest, Message: refusedTags})
	h.createService(exposed("tagged", nil))
	h.wantCondition("tagged", "False", "ProxyFailed", `"`+refusedTags+`"`)
	h.wantCondition("tagged", "False", "ProxyFailed", "an owner of tag:k8s in tagOwners")
	h.wantEvent(h.ns, "tagged", corev1.EventTypeWarning, "ProxyFailed", refusedTags)
	if err := h.proxyGone("svc", "tagged"); err != nil {
		t.Fatal(err)
	}

	h.createIngressClass(false)
	h.backend("web", 8080)
	h.createIngress("site", nil, networkingv1.IngressSpec{DefaultBackend: defaultBackend("web", 8080)})
	h.wantEvent(h.ns, "site", corev1.EventTypeWarning, ingress.ReasonProxyFailed, refusedTags+`". The operator's OAuth client`)

	g := h.proxyGroup(`{"type":"ingress","replicas":1}`)
	g.wantCondition(v1alpha1.ProxyGroupReady, "False", v1alpha1.ReasonProxyGroupCreationFailed, refusedTags)

	// Asked once per object, then not again for TagsRetry.
	attempts := h.api.Attempts(tailnettest.EndpointKeys)
	testpoll.AlwaysTrue(t, 5*time.Second, "no new auth key request", func() bool {
		return h.api.Attempts(tailnettest.EndpointKeys) == attempts
	})
}
