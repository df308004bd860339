package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/tailplane/tailplane/handlers/gatewayclass"
	"github.com/tailplane/tailplane/handlers/lib/cluster"
	"github.com/tailplane/tailplane/handlers/lib/gatewayapi"
	"github.com/tailplane/tailplane/handlers/lib/groupmember"
	"github.com/tailplane/tailplane/handlers/lib/pipeline"
	"github.com/tailplane/tailplane/handlers/lib/proxyclassrules"
	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/handlers/lib/resources"
	"github.com/tailplane/tailplane/internal/proxystate"
	"github.com/tailplane/tailplane/proxy/config"
	"github.com/tailplane/tailplane/runtime"
)

// Role is the role of Gateway proxies; ParentType their parent type label
// (the official operator has no Gateways, so no official value).
const (
	Role       = "gateway"
	ParentType = "gateway"
)

// Index names.
const (
	indexOurClasses      = "gatewayclasses-ours"
	indexGatewaysByClass = "gateways-by-class"
	indexGrants          = "referencegrants"
	keyOurs              = "ours"
)

// indexRoutes is the index of a route kind's routes by Gateway
// ("namespace/name" -> *Route); indexBackends the index of the Gateways
// whose routes of that kind use a Service ("namespace/service" ->
// []string of "namespace/gateway").
func indexRoutes(kind string) string   { return strings.ToLower(kind) + "s-by-gateway" }
func indexBackends(kind string) string { return strings.ToLower(kind) + "s-by-backend" }

type module struct {
	d     *cluster.Deps
	kinds []string // the route kinds whose CRDs are installed

	mu sync.Mutex
	// last is each Gateway's Render result from its Plan, which its Report
	// of the same cycle turns into status.
	last map[string]*gatewayapi.Result
}

// Register adds the Gateway module to the pipeline, when the Gateway API
// serves Gateways (served are the resources of its group the API server
// serves; route kinds not served are left out). A Gateway of a class of
// ours gets one device; its routes, their backend Services, the
// ReferenceGrants and the classes have it handled again through the
// runtime's queue.
func Register(op *runtime.Operator, d *cluster.Deps, p *pipeline.Pipeline, members *groupmember.Registry, served map[string]bool) {
	if !served[resources.Gateways.Resource] {
		return
	}
	m := &module{d: d, last: map[string]*gatewayapi.Result{}}
	for _, k := range gatewayapi.RouteKinds() {
		if served[gatewayapi.RouteResource(k).Resource] {
			m.kinds = append(m.kinds, k)
		}
	}
	op.Index(resources.GatewayClasses, indexOurClasses, func(obj *unstructured.Unstructured) map[string]any {
		if c, _, _ := unstructured.NestedString(obj.Object, "spec", "controllerName"); c == string(gatewayclass.ControllerName) {
			return map[string]any{keyOurs: obj.GetName()}
		}
		return nil
	})
	op.Index(resources.Gateways, indexGatewaysByClass, func(obj *unstructured.Unstructured) map[string]any {
		class, _, _ := unstructured.NestedString(obj.Object, "spec", "gatewayClassName")
		return map[string]any{class: runtime.ObjectKey(obj.GetNamespace(), obj.GetName())}
	}, d.Scope()...)
	p.Register(op, pipeline.Module{
		ID: "gateway", Resource: resources.Gateways, Kind: "Gateway",
		ParentType: ParentType, Role: Role, ProxyKind: proxyclassrules.L7,
		IsOurs: m.isOurs, Plan: m.plan, Report: m.report, Release: m.release,
		Tailnet: pipeline.AnnotatedTailnet,
	})
	m.registerMember(op, p, members)
	op.OnDelete(resources.Gateways, "gateway-routes-release", func(ctx context.Context, ev *runtime.Event) (any, error) {
		return nil, m.releaseRoutes(ctx, ev.Object)
	}, d.Scope(runtime.When(m.ofOurClass), d.StateStore())...)
	op.Watch(resources.GatewayClasses, "gateway-classes", func(_ watch.EventType, _, obj *unstructured.Unstructured) []runtime.Key {
		return d.Indexed(indexGatewaysByClass, obj.GetName(), resources.Gateways)
	})
	op.Index(resources.ReferenceGrants, indexGrants, func(obj *unstructured.Unstructured) map[string]any {
		var g gatewayv1.ReferenceGrant
		if cluster.FromUnstructured(obj, &g) != nil {
			return nil
		}
		return map[string]any{keyOurs: &g}
	})
	op.Watch(resources.ReferenceGrants, "gateway-grants", func(watch.EventType, *unstructured.Unstructured, *unstructured.Unstructured) []runtime.Key {
		return m.ourGateways() // rare: every Gateway of ours resolves its references again
	})
	for _, kind := range m.kinds {
		m.registerRoutes(op, kind)
	}
	op.Watch(resources.Namespaces, "gateway-namespaces", func(_ watch.EventType, old, obj *unstructured.Unstructured) []runtime.Key {
		// A namespace's labels decide allowedRoutes selectors; routes of a
		// new namespace come after it, and have their Gateways handled.
		if old == nil || maps.Equal(old.GetLabels(), obj.GetLabels()) {
			return nil
		}
		return m.ourGateways()
	})
	op.Watch(resources.Services, "gateway-backends", func(_ watch.EventType, _, obj *unstructured.Unstructured) []runtime.Key {
		var out []runtime.Key
		for _, kind := range m.kinds {
			for _, v := range op.GetIndex(indexBackends(kind)).Get(runtime.ObjectKey(obj.GetNamespace(), obj.GetName())) {
				for _, gw := range v.([]string) {
					out = append(out, m.handlersOf(gw)...)
				}
			}
		}
		return out
	}, d.Scope()...)
	op.Timer(resources.Gateways, "gateway-certificates", d.CertRefresh, func(_ context.Context, ev *runtime.Event) (any, error) {
		d.Op.Enqueue(resources.Gateways, runtime.ObjectKey(ev.Object.GetNamespace(), ev.Object.GetName()), 0)
		return nil, nil
	}, d.Scope(runtime.When(func(obj *unstructured.Unstructured) bool { return m.ofOurClass(obj) && hasCertificateRefs(obj) }), d.StateStore())...)
}

// registerRoutes indexes a route kind by Gateway and by backend, and has
// the Gateways a route names (before and after a change) handled again.
func (m *module) registerRoutes(op *runtime.Operator, kind string) {
	res := gatewayapi.RouteResource(kind)
	op.Index(res, indexRoutes(kind), func(obj *unstructured.Unstructured) map[string]any {
		r, err := gatewayapi.DecodeRoute(kind, obj)
		if err != nil {
			return nil
		}
		out := map[string]any{}
		for _, gw := range r.Gateways(true) {
			out[gw] = r
		}
		return out
	}, m.d.Scope()...)
	op.Index(res, indexBackends(kind), func(obj *unstructured.Unstructured) map[string]any {
		r, err := gatewayapi.DecodeRoute(kind, obj)
		if err != nil {
			return nil
		}
		gws := r.Gateways(false)
		out := map[string]any{}
		for _, svc := range r.BackendServices() {
			out[svc] = gws
		}
		return out
	}, m.d.Scope()...)
	op.Watch(res, "gateway-"+strings.ToLower(kind)+"s", func(_ watch.EventType, old, obj *unstructured.Unstructured) []runtime.Key {
		var out []runtime.Key
		for _, o := range []*unstructured.Unstructured{old, obj} {
			if o == nil {
				continue
			}
			if r, err := gatewayapi.DecodeRoute(kind, o); err == nil {
				for _, gw := range r.Gateways(true) {
					out = append(out, m.handlersOf(gw)...)
				}
			}
		}
		return out
	}, m.d.Scope()...)
}

// handlersOf are the keys to handle again when what Gateway nsName serves
// changed: the Gateway, and the ProxyGroup whose replicas serve it.
func (m *module) handlersOf(nsName string) []runtime.Key {
	ns, name, _ := strings.Cut(nsName, "/")
	out := []runtime.Key{{Resource: resources.Gateways, Namespace: ns, Name: name}}
	if group := m.groupOf(nsName); group != "" {
		out = append(out, runtime.Key{Resource: resources.ProxyGroups, Name: group})
	}
	return out
}

// isOurs reports whether the Gateway asks for a device of its own: its
// class is one of ours and it names no ProxyGroup.
func (m *module) isOurs(obj *unstructured.Unstructured) bool {
	return m.ofOurClass(obj) && GroupName(obj) == ""
}

// ofOurClass reports whether the Gateway's class is one of ours.
func (m *module) ofOurClass(obj *unstructured.Unstructured) bool {
	class, _, _ := unstructured.NestedString(obj.Object, "spec", "gatewayClassName")
	for _, v := range m.d.Op.GetIndex(indexOurClasses).Get(keyOurs) {
		if v == class {
			return true
		}
	}
	return false
}

// ourGateways are the keys of every Gateway of a class of ours.
func (m *module) ourGateways() []runtime.Key {
	var out []runtime.Key
	for _, class := range m.d.Op.GetIndex(indexOurClasses).Get(keyOurs) {
		out = append(out, m.d.Indexed(indexGatewaysByClass, class.(string), resources.Gateways)...)
	}
	return out
}

func hasCertificateRefs(obj *unstructured.Unstructured) bool {
	ls, _, _ := unstructured.NestedSlice(obj.Object, "spec", "listeners")
	for _, l := range ls {
		if refs, _, _ := unstructured.NestedSlice(l.(map[string]any), "tls", "certificateRefs"); len(refs) > 0 {
			return true
		}
	}
	return false
}

func decode(obj *unstructured.Unstructured) (*gatewayv1.Gateway, error) {
	var gw gatewayv1.Gateway
	if err := cluster.FromUnstructured(obj, &gw); err != nil {
		return nil, runtime.Permanent(err)
	}
	gw.APIVersion, gw.Kind = resources.Gateways.GroupVersion().String(), "Gateway"
	return &gw, nil
}

// Parent is the proxyset parent of gw's proxy.
func Parent(gw *gatewayv1.Gateway) proxyset.Parent {
	return proxyset.Parent{Type: ParentType, Namespace: gw.Namespace, Name: gw.Name, UID: gw.UID, Role: Role}
}

// CertificateName is the name of the copy, in the operator namespace, of
// listener's certificate Secret: the proxy's base name, a hash of the
// listener's name (up to 253 characters), "-tls".
func CertificateName(gw *gatewayv1.Gateway, listener string) string {
	sum := sha256.Sum256([]byte(listener))
	return Parent(gw).Names().Base + "-" + hex.EncodeToString(sum[:])[:8] + "-tls"
}

// Hostname is the Gateway's tailnet hostname: tailscale.com/hostname, else
// DefaultHostname.
func Hostname(gw *gatewayv1.Gateway) (string, error) {
	h, set := gw.Annotations[proxystate.AnnotationHostname]
	if !set {
		h = DefaultHostname(gw)
	}
	if err := proxyset.ValidHostname(h); err != nil {
		if set {
			return "", fmt.Errorf("invalid Tailscale hostname %q in annotation %s: %s", h, proxystate.AnnotationHostname, err)
		}
		return "", fmt.Errorf("invalid Tailscale hostname %q (the default), set annotation %s: %s", h, proxystate.AnnotationHostname, err)
	}
	return strings.ToLower(h), nil
}

// maxLabel is the longest DNS label, and so the longest tailnet hostname.
const maxLabel = 63

// DefaultHostname is <namespace>-<name>-gateway, dots made hyphens (a
// Gateway's name is a DNS subdomain, a hostname one label). A longer one
// than a DNS label allows (namespace and name may be 63 and 253 characters)
// is cut, and a hash of namespace/name keeps Gateways whose names share
// the cut prefix apart: <prefix>-<8 hex digits>-gateway, 63 characters.
func DefaultHostname(gw *gatewayv1.Gateway) string {
	h := strings.ReplaceAll(gw.Namespace+"-"+gw.Name, ".", "-") + "-gateway"
	if len(h) <= maxLabel {
		return h
	}
	sum := sha256.Sum256([]byte(gw.Namespace + "/" + gw.Name))
	suffix := "-" + hex.EncodeToString(sum[:])[:8] + "-gateway"
	prefix := strings.TrimRight(h[:maxLabel-len(suffix)], "-")
	return prefix + suffix
}

// ProxyClassName is the ProxyClass of the Gateway's proxy:
// spec.infrastructure.parametersRef when it names a ProxyClass, else the
// tailscale.com/proxy-class label, else the default.
func ProxyClassName(gw *gatewayv1.Gateway, def string) string {
	if inf := gw.Spec.Infrastructure; inf != nil && inf.ParametersRef != nil &&
		string(inf.ParametersRef.Group) == "tailscale.com" && string(inf.ParametersRef.Kind) == "ProxyClass" {
		return inf.ParametersRef.Name
	}
	return proxyset.ProxyClassName(gw.Labels, gw.Annotations, def)
}

// gatewayConfig is the proxy config of the Gateway's device.
func proxyConfig(hostname string, tags []string, gw *config.Gateway) *config.Config {
	return &config.Config{Version: config.Version, Hostname: hostname, Tags: tags, Role: config.RoleGateway, Gateway: gw}
}

// certificateCopy is the copy of a listener's certificate Secret that the
// proxy reads.
func certificateCopy(name, namespace string, labels map[string]string, src *corev1.Secret) *corev1.Secret {
	s := &corev1.Secret{Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: src.Data[corev1.TLSCertKey], corev1.TLSPrivateKeyKey: src.Data[corev1.TLSPrivateKeyKey]}}
	s.APIVersion, s.Kind = "v1", "Secret"
	s.Name, s.Namespace, s.Labels = name, namespace, labels
	return s
}
