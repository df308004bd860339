package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/tailplane/tailplane/handlers/gatewayclass"
	"github.com/tailplane/tailplane/handlers/lib/cluster"
	"github.com/tailplane/tailplane/handlers/lib/conditions"
	"github.com/tailplane/tailplane/handlers/lib/gatewayapi"
	"github.com/tailplane/tailplane/handlers/lib/pipeline"
	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/handlers/lib/resources"
	"github.com/tailplane/tailplane/handlers/plugin"
	"github.com/tailplane/tailplane/internal/tailnet"
	"github.com/tailplane/tailplane/proxy/config"
	"github.com/tailplane/tailplane/runtime"
)

// AnnotationFunnel, on a Gateway, exposes its HTTPS listeners on the
// ports Funnel offers to the internet (the Ingress annotation's name).
const AnnotationFunnel = "tailscale.com/funnel"

// ReasonFunnelNotAllowed is the Warning of a Gateway asking for Funnel on a
// control server without it (the Ingress's reason).
const ReasonFunnelNotAllowed = "FunnelNotAllowed"

// Funnel reports whether the Gateway asks for Funnel.
func Funnel(gw *gatewayv1.Gateway) bool {
	on, err := strconv.ParseBool(gw.Annotations[AnnotationFunnel])
	return err == nil && on
}

// funnelRefused is the message for a Funnel the tailnet does not offer,
// "" when it does.
func funnelRefused(be tailnet.Backend) string {
	if tailnet.Supports(be, tailnet.FeatureFunnel) {
		return ""
	}
	return tailnet.Unsupported(be, AnnotationFunnel+` "true"`, tailnet.FeatureFunnel) +
		": the Gateway is served on the tailnet only, not on the internet; remove the annotation to silence this"
}

// conflictRetry is how soon a route status write that lost a race with
// another writer is tried again, with the route as it is now.
const conflictRetry = 200 * time.Millisecond

// awaitSecretRetry is how soon a Gateway whose certificateRefs name a
// Secret that does not exist is handled again (at most; Deps.CertRefresh
// when that is shorter).
const awaitSecretRetry = 5 * time.Second

// plan resolves the Gateway against its routes (read from the indexes)
// and returns its device's proxy: Invalid when no listener is valid or the
// Gateway asks for what cannot be served.
func (m *module) plan(ctx context.Context, obj *unstructured.Unstructured) (*pipeline.Plan, error) {
	gw, err := decode(obj)
	if err != nil {
		return nil, err
	}
	be, err := m.d.Tailnets.For(pipeline.AnnotatedTailnet(obj))
	if err != nil {
		return nil, err // the pipeline checked it already: a race with the Tailnet's handler
	}
	in := gatewayapi.Inputs{Routes: m.routesOf(gw), Grants: m.grants(), Lookups: m.lookups(ctx),
		CertificateName: func(l string) string { return CertificateName(gw, l) }}
	if !tailnet.Supports(be, tailnet.FeatureCertificates) {
		in.NoCertificates = tailnet.Unsupported(be, "an HTTPS listener without certificateRefs", tailnet.FeatureCertificates) +
			": name a kubernetes.io/tls Secret in tls.certificateRefs, or use an HTTP listener (tailnet traffic is encrypted by WireGuard)"
	}
	if Funnel(gw) {
		if msg := funnelRefused(be); msg != "" {
			m.d.Post(gw, corev1.EventTypeWarning, ReasonFunnelNotAllowed, msg)
		} else {
			in.Funnel = true
		}
	}
	res, err := gatewayapi.Render(gw, in)
	if err != nil {
		return nil, err
	}
	m.remember(gw, res)
	if res.AwaitingSecrets {
		// The operator may get Secrets outside its namespace, not watch
		// them: look again soon for one applied after the Gateway.
		m.d.Op.Enqueue(resources.Gateways, runtime.ObjectKey(gw.Namespace, gw.Name), min(m.d.CertRefresh, awaitSecretRetry))
	}
	hostname, err := Hostname(gw)
	var tags []string
	if err == nil {
		tags, err = proxyset.Tags(gw.Annotations, m.d.Settings.ProxyTags)
	}
	switch {
	case err != nil:
		return &pipeline.Plan{Invalid: err.Error()}, nil
	case res.Refused != "":
		return &pipeline.Plan{Invalid: res.Refused}, nil
	case res.Config == nil:
		return &pipeline.Plan{Invalid: "no listener of the Gateway is valid"}, nil
	}
	labels := Parent(gw).Labels()
	var copies []any
	secrets := []string{}
	for name, src := range res.Certificates {
		copies = append(copies, certificateCopy(name, m.d.Settings.Namespace, labels, src))
		secrets = append(secrets, name)
	}
	return &pipeline.Plan{
		Hostnames: []string{hostname}, Tags: tags, ProxyClass: ProxyClassName(gw, m.d.Settings.DefaultProxyClass),
		ExtraSecrets: append(secrets, res.PluginSecrets...),
		Config:       func(int) (*config.Config, error) { return proxyConfig(hostname, tags, res.Config), nil },
		Extra:        func(*proxyset.Objects) []any { return copies },
	}, nil
}

// report writes the Gateway's status (addresses, conditions, listeners)
// and its routes' status.parents entries of this controller.
func (m *module) report(ctx context.Context, obj *unstructured.Unstructured, out pipeline.Outcome) error {
	gw, err := decode(obj)
	if err != nil {
		return err
	}
	res := m.recall(gw)
	if res == nil {
		return nil
	}
	p := gatewayapi.Proxy{Programmed: out.Stage == pipeline.Ready, Message: out.Message}
	switch out.Stage {
	case pipeline.Invalid:
		p.Reason = string(gatewayv1.GatewayReasonInvalid)
	case pipeline.Ready:
	default:
		p.Reason = string(gatewayv1.GatewayReasonPending)
		if p.Message == "" {
			p.Message = "waiting for the device to serve the Gateway"
		}
	}
	if len(out.Serving) > 0 {
		p.Device = out.Serving[0]
	} else if len(out.Devices) > 0 {
		p.Device = out.Devices[0]
	}
	if !p.Programmed && len(p.Device.IPs) == 0 && out.Stage != pipeline.Invalid {
		p.Reason = string(gatewayv1.GatewayReasonAddressNotAssigned)
	}
	return m.writeStatuses(ctx, gw, res, p)
}

// release clears the status of a Gateway whose class is no longer ours, and
// its routes' entries for it. A Gateway that only moved between a device
// of its own and a ProxyGroup keeps them: the handler of its new home
// writes them.
func (m *module) release(ctx context.Context, obj *unstructured.Unstructured, _ []proxyset.Device) error {
	if m.ofOurClass(obj) {
		return nil
	}
	if err := m.releaseRoutes(ctx, obj); err != nil {
		return err
	}
	return m.d.PatchStatus(ctx, resources.Gateways, obj.GetNamespace(), obj.GetName(), map[string]any{"addresses": nil, "conditions": nil, "listeners": nil})
}

// releaseRoutes removes this controller's status.parents entries for the
// Gateway from every route that has one.
func (m *module) releaseRoutes(ctx context.Context, obj *unstructured.Unstructured) error {
	gw, err := decode(obj)
	if err != nil {
		return err
	}
	parents := map[string][]gatewayv1.RouteParentStatus{}
	for _, r := range m.routesOf(gw) {
		parents[r.Key()] = nil
	}
	m.forget(gw)
	return m.writeRouteStatuses(ctx, gw, parents)
}

func (m *module) remember(gw *gatewayv1.Gateway, res *gatewayapi.Result) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.last[string(gw.UID)] = res
}

func (m *module) recall(gw *gatewayv1.Gateway) *gatewayapi.Result {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.last[string(gw.UID)]
}

func (m *module) forget(gw *gatewayv1.Gateway) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.last, string(gw.UID))
}

// routesOf are the routes of every served kind that name gw or carry an
// entry of ours for it, from the indexes.
func (m *module) routesOf(gw *gatewayv1.Gateway) []*gatewayapi.Route {
	var out []*gatewayapi.Route
	for _, kind := range m.kinds {
		for _, v := range m.d.Op.GetIndex(indexRoutes(kind)).Get(gw.Namespace + "/" + gw.Name) {
			out = append(out, v.(*gatewayapi.Route))
		}
	}
	return out
}

func (m *module) grants() []gatewayv1.ReferenceGrant {
	var out []gatewayv1.ReferenceGrant
	for _, v := range m.d.Op.GetIndex(indexGrants).Get(keyOurs) {
		out = append(out, *v.(*gatewayv1.ReferenceGrant))
	}
	return out
}

// lookups read the API server.
func (m *module) lookups(ctx context.Context) gatewayapi.Lookups {
	core := m.d.Kube.CoreV1()
	return gatewayapi.Lookups{
		ClusterDomain: m.d.ClusterDomain,
		Service: func(ns, name string) (*corev1.Service, error) {
			return nilIfNotFound(core.Services(ns).Get(ctx, name, metav1.GetOptions{}))
		},
		Secret: func(ns, name string) (*corev1.Secret, error) {
			return nilIfNotFound(core.Secrets(ns).Get(ctx, name, metav1.GetOptions{}))
		},
		NamespaceLabels: func(name string) (map[string]string, error) {
			ns, err := nilIfNotFound(core.Namespaces().Get(ctx, name, metav1.GetOptions{}))
			if ns == nil {
				return nil, err
			}
			return ns.Labels, nil
		},
		Plugin: func(ns, name string) (config.Plugin, string, bool, error) {
			obj, err := m.d.Dyn.Resource(resources.RoutingPlugins).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return config.Plugin{}, "", false, nil
			}
			if err != nil {
				return config.Plugin{}, "", false, fmt.Errorf("read RoutingPlugin %s/%s: %w", ns, name, err)
			}
			rp, err := plugin.Decode(obj)
			if err != nil || !rp.Serving() {
				return config.Plugin{}, "", false, nil
			}
			p, err := plugin.ProxyPlugin(rp)
			if err != nil {
				return config.Plugin{}, "", false, nil
			}
			return p, plugin.ChunkNames(rp.Status.SHA256, rp.Status.Chunks)[0], true, nil
		},
	}
}

func nilIfNotFound[T any](obj *T, err error) (*T, error) {
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return obj, err
}

// writeStatuses writes gw's status for its resolution res and its proxy p,
// then its routes' entries.
func (m *module) writeStatuses(ctx context.Context, gw *gatewayv1.Gateway, res *gatewayapi.Result, p gatewayapi.Proxy) error {
	if err := m.writeGatewayStatus(ctx, gw, gatewayapi.Status(gw, res, p)); err != nil {
		return err
	}
	return m.writeRouteStatuses(ctx, gw, res.Parents)
}

// writeGatewayStatus patches gw's status when it differs, keeping the
// transition time of conditions that did not change.
func (m *module) writeGatewayStatus(ctx context.Context, gw *gatewayv1.Gateway, want gatewayv1.GatewayStatus) error {
	want.Conditions = mergeConditions(gw.Status.Conditions, want.Conditions)
	for i := range want.Listeners {
		var old []metav1.Condition
		for _, l := range gw.Status.Listeners {
			if l.Name == want.Listeners[i].Name {
				old = l.Conditions
			}
		}
		want.Listeners[i].Conditions = mergeConditions(old, want.Listeners[i].Conditions)
	}
	if reflect.DeepEqual(normalize(gw.Status), normalize(want)) {
		return nil
	}
	return m.d.PatchStatus(ctx, resources.Gateways, gw.Namespace, gw.Name, map[string]any{
		"addresses": want.Addresses, "conditions": want.Conditions, "listeners": want.Listeners,
	})
}

// normalize makes empty and nil lists equal for comparison.
func normalize(st gatewayv1.GatewayStatus) string {
	b, _ := json.Marshal(st)
	return string(b)
}

// mergeConditions is want with the transition time of old's conditions
// whose status did not change (now for those that did).
func mergeConditions(old, want []metav1.Condition) []metav1.Condition {
	out := make([]metav1.Condition, 0, len(want))
	for _, c := range want {
		merged := conditions.Set(append([]metav1.Condition(nil), old...), c)
		for _, x := range merged {
			if x.Type == c.Type {
				out = append(out, x)
			}
		}
	}
	return out
}

// writeRouteStatuses sets, on each route of parents (by Route.Key), this
// controller's status.parents entries for gw to the given ones, keeping
// every other entry; a route is patched only when that changes it. The
// patch carries the route's resourceVersion, so that two Gateways writing
// one route's status never lose each other's entries (a conflict is
// retried by the runtime).
func (m *module) writeRouteStatuses(ctx context.Context, gw *gatewayv1.Gateway, parents map[string][]gatewayv1.RouteParentStatus) error {
	routes := map[string]*gatewayapi.Route{}
	for _, r := range m.routesOf(gw) {
		routes[r.Key()] = r
	}
	for key, want := range parents {
		r := routes[key]
		if r == nil {
			continue
		}
		var keep []gatewayv1.RouteParentStatus
		old := map[int][]metav1.Condition{}
		for _, p := range r.Parents {
			if p.ControllerName == gatewayclass.ControllerName && gatewayapi.RefersTo(r.Namespace, p.ParentRef, gw.Namespace, gw.Name) {
				for i := range want {
					if reflect.DeepEqual(want[i].ParentRef, p.ParentRef) {
						old[i] = p.Conditions
					}
				}
				continue
			}
			keep = append(keep, p)
		}
		for i := range want {
			want[i].Conditions = mergeConditions(old[i], want[i].Conditions)
		}
		next := append(keep, want...)
		if next == nil {
			next = []gatewayv1.RouteParentStatus{}
		}
		if sameParents(r.Parents, next) {
			continue
		}
		if err := m.patchRouteParents(ctx, r, next); err != nil {
			return err
		}
	}
	return nil
}

func sameParents(a, b []gatewayv1.RouteParentStatus) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return len(a) == len(b) && string(ja) == string(jb)
}

func (m *module) patchRouteParents(ctx context.Context, r *gatewayapi.Route, parents []gatewayv1.RouteParentStatus) error {
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": r.ResourceVersion},
		"status":   map[string]any{"parents": parents},
	})
	if err != nil {
		return fmt.Errorf("encode status of %s: %w", r.Key(), err)
	}
	_, err = m.d.Dyn.Resource(gatewayapi.RouteResource(r.Kind)).Namespace(r.Namespace).Patch(ctx, r.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: cluster.FieldManager}, "status")
	if apierrors.IsNotFound(err) {
		return nil
	}
	if apierrors.IsConflict(err) {
		return runtime.Temporary(fmt.Errorf("write status of %s %s/%s: %w", r.Kind, r.Namespace, r.Name, err), conflictRetry)
	}
	if err != nil {
		return fmt.Errorf("write status of %s %s/%s: %w", r.Kind, r.Namespace, r.Name, err)
	}
	return nil
}
