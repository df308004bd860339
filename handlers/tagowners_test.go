package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tailplane/tailplane/crds/tailscale/v1alpha1"
	"github.com/tailplane/tailplane/handlers/ingress"
	"github.com/tailplane/tailplane/handlers/lib/pipeline"
	"github.com/tailplane/tailplane/internal/proxystate"
	"github.com/tailplane/tailplane/internal/tailnet"
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

// An Ingress with tailscale.com/funnel whose proxy's device lacks the
// funnel node attribute (the proxy's ListenFunnel fails with tailscale's
// words, recorded as config_error) gets a Warning Event saying Funnel is
// not allowed and which nodeAttrs entry allows it. Its status names the
// proxy only while the proxy serves: not while its running process
// applied no config, again once it serves the tailnet side without Funnel
// (config_applied), and after the policy gives the attribute.
func TestIngressFunnelWithoutAttribute(t *testing.T) {
	h := newHarness(t, nil)
	h.createIngressClass(false)
	h.backend("web", 8080)
	h.createIngress("public", map[string]string{ingress.AnnotationFunnel: "true"}, networkingv1.IngressSpec{
		DefaultBackend: defaultBackend("web", 8080),
		TLS:            []networkingv1.IngressTLS{{Hosts: []string{"public"}}},
	})
	testpoll.Until(t, settle, "proxy", func() error { return h.proxyExists("ingress", "public") })
	cfg, err := h.proxyConfig("ingress", "public")
	if err != nil || !cfg.L7.Funnel {
		t.Fatalf("config %+v %v: want Funnel on", cfg, err)
	}
	h.simulateLogin("ingress", "public", "nPUB", "public.tail1.ts.net", "100.64.0.12")
	h.wantIngressAddress("public", "public.tail1.ts.net")
	state := h.names("ingress", "public").StateSecret
	patchState := func(data map[string]any) {
		t.Helper()
		patch, _ := json.Marshal(map[string]any{"data": data})
		if _, err := h.kube.CoreV1().Secrets(h.opNS).Patch(h.ctx(), state, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	refused := `open listener l7/funnel/tcp/443: funnel: Funnel not available; "funnel" node attribute not set. See https://tailscale.com/s/no-funnel.`
	patchState(map[string]any{proxystate.KeyConfigError: []byte(refused)})
	h.wantEvent(h.ns, "public", corev1.EventTypeWarning, ingress.ReasonProxyFailed, pipeline.FunnelNotAllowed)
	h.wantEvent(h.ns, "public", corev1.EventTypeWarning, ingress.ReasonProxyFailed, refused)
	h.wantIngressAddress("public", "")

	// The proxy's process applied the rest of its config: the tailnet side
	// serves, without Funnel.
	patchState(map[string]any{proxystate.KeyPodUID: []byte("pod-1"), proxystate.KeyConfigApplied: []byte("pod-1")})
	h.wantIngressAddress("public", "public.tail1.ts.net")

	// The policy gives the attribute: the proxy applies all of its config.
	patchState(map[string]any{proxystate.KeyConfigError: nil})
	h.wantIngressAddress("public", "public.tail1.ts.net")
}

// wantIngressAddress waits until the Ingress's status names hostname (""
// for none).
func (h *harness) wantIngressAddress(name, hostname string) {
	h.t.Helper()
	testpoll.Until(h.t, settle, "address of Ingress "+name, func() error {
		ing, err := h.kube.NetworkingV1().Ingresses(h.ns).Get(h.ctx(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		lb := ing.Status.LoadBalancer.Ingress
		if hostname == "" && len(lb) != 0 || hostname != "" && (len(lb) != 1 || lb[0].Hostname != hostname) {
			return fmt.Errorf("status %+v, want %q", lb, hostname)
		}
		return nil
	})
}

// headscaleKeys is headscaleLike whose auth keys the Headscale backend
// mints, against a Headscale API double serving a policy: its tagOwners
// check is the operator's.
type headscaleKeys struct {
	headscaleLike
	hs *tailnet.Headscale
}

func (k headscaleKeys) CreateAuthKey(ctx context.Context, tags []string, pre, reusable, ephemeral bool) (string, error) {
	return k.hs.CreateAuthKey(ctx, tags, pre, reusable, ephemeral)
}

func (k headscaleKeys) MintAuthKey(ctx context.Context, r tailnet.KeyRequest) (tailnet.AuthKey, error) {
	return k.hs.MintAuthKey(ctx, r)
}

// On Headscale, which would give a pre-auth key any tag, a Service asking
// for a tag Headscale's tagOwners does not give the operator gets the
// condition and Warning Event a refused tag gets on Tailscale (ProxyFailed,
// the Tailscale API's words) with what owns a tag on Headscale, and no
// proxy; a Service with a tag the policy gives (declared without owners)
// gets its proxy.
func TestHeadscaleRefusesTagsItsPolicyDoesNotGive(t *testing.T) {
	api := tailnettest.NewHeadscaleAPI()
	t.Cleanup(api.Close)
	api.SetPolicy(`{"tagOwners": {"tag:k8s": [], "tag:alice": ["alice@"]}}`)
	hs, err := tailnet.NewHeadscale(tailnet.HeadscaleOptions{URL: api.URL, APIKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, nil)
	h.stop()
	h.control = func(b tailnet.Backend) tailnet.Backend { return headscaleKeys{headscaleLike{b}, hs} }
	h.start()

	h.createService(exposed("notowned", map[string]string{"tailscale.com/tags": "tag:notowned"}))
	refused := tailnet.NotPermittedTags([]string{"tag:notowned"})
	h.wantCondition("notowned", "False", "ProxyFailed", `"`+refused+`"`)
	h.wantCondition("notowned", "False", "ProxyFailed", `declare tag:notowned with the owner "tailplane@"`)
	h.wantEvent(h.ns, "notowned", corev1.EventTypeWarning, "ProxyFailed", refused)
	if err := h.proxyGone("svc", "notowned"); err != nil {
		t.Fatal(err)
	}

	h.createService(exposed("owned", nil))
	testpoll.Until(t, settle, "proxy of a Service with tag:k8s", func() error { return h.proxyExists("svc", "owned") })
	for _, tags := range api.Minted() {
		if slices.Contains(tags, "tag:notowned") {
			t.Fatalf("a key was minted with %v", tags)
		}
	}
}
