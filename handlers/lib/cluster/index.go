package cluster

import (
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/handlers/lib/resources"
	"github.com/tailplane/tailplane/runtime"
)

// Index names.
const (
	// IndexServicesByProxyClass: ProxyClass name -> "namespace/name" of the
	// Services that use it (explicitly or through PROXY_DEFAULT_CLASS).
	IndexServicesByProxyClass = "services-by-proxyclass"
	// IndexIngressesByProxyClass: the same for Ingresses.
	IndexIngressesByProxyClass = "ingresses-by-proxyclass"
	// IndexIngressesByClass: IngressClass name -> Ingresses of that class.
	IndexIngressesByClass = "ingresses-by-class"
	// IndexIngressesByBackend: "namespace/service" -> Ingresses routing to it.
	IndexIngressesByBackend = "ingresses-by-backend"
	// IndexConnectorsByProxyClass: ProxyClass name -> names of the
	// Connectors that use it (spec.proxyClass).
	IndexConnectorsByProxyClass = "connectors-by-proxyclass"
	// IndexProxyGroupsByProxyClass: ProxyClass name -> names of the
	// ProxyGroups that use it (spec.proxyClass, else PROXY_DEFAULT_CLASS).
	IndexProxyGroupsByProxyClass = "proxygroups-by-proxyclass"
	// IndexProxyClasses: ProxyClass name -> the ProxyClass, decoded (a
	// *v1alpha1.ProxyClass, or the error decoding it gave), which
	// ProxyClassFor reads instead of asking the API server every cycle.
	IndexProxyClasses = "proxyclasses"
)

// IndexParents registers the indexes that find parents from the objects they
// refer to (ProxyClass, IngressClass), and the ProxyClasses themselves.
func (d *Deps) IndexParents() {
	d.Op.Index(resources.ProxyClasses, IndexProxyClasses, func(obj *unstructured.Unstructured) map[string]any {
		pc, err := decodeProxyClass(obj)
		if err != nil {
			return map[string]any{obj.GetName(): err}
		}
		return map[string]any{obj.GetName(): pc}
	})
	byClass := func(obj *unstructured.Unstructured) map[string]any {
		name := proxyset.ProxyClassName(obj.GetLabels(), obj.GetAnnotations(), d.Settings.DefaultProxyClass)
		if name == "" {
			return nil
		}
		return map[string]any{name: runtime.ObjectKey(obj.GetNamespace(), obj.GetName())}
	}
	d.Op.Index(resources.Services, IndexServicesByProxyClass, byClass, d.Scope()...)
	d.Op.Index(resources.Ingresses, IndexIngressesByProxyClass, byClass, d.Scope()...)
	// Cluster-scoped parents: their values are their names.
	specClass := func(fallback string) func(obj *unstructured.Unstructured) map[string]any {
		return func(obj *unstructured.Unstructured) map[string]any {
			name, _, _ := unstructured.NestedString(obj.Object, "spec", "proxyClass")
			if name == "" {
				name = fallback
			}
			if name == "" {
				return nil
			}
			return map[string]any{name: obj.GetName()}
		}
	}
	d.Op.Index(resources.Connectors, IndexConnectorsByProxyClass, specClass(""))
	d.Op.Index(resources.ProxyGroups, IndexProxyGroupsByProxyClass, specClass(d.Settings.DefaultProxyClass))
	d.Op.Index(resources.Ingresses, IndexIngressesByClass, func(obj *unstructured.Unstructured) map[string]any {
		class, _, _ := unstructured.NestedString(obj.Object, "spec", "ingressClassName")
		if class == "" {
			return nil
		}
		return map[string]any{class: runtime.ObjectKey(obj.GetNamespace(), obj.GetName())}
	}, d.Scope()...)
}

// EnqueueIndexed has the runtime handle again the objects of resource
// found under key in index (values are "namespace/name", or the name of a
// cluster-scoped object).
func (d *Deps) EnqueueIndexed(index, key string, resource schema.GroupVersionResource) {
	for _, k := range d.Indexed(index, key, resource) {
		d.Op.Enqueue(resource, k.ObjectKey(), 0)
	}
}

// Indexed returns the keys of the objects of resource found under key in
// index, for a runtime Watch mapping.
func (d *Deps) Indexed(index, key string, resource schema.GroupVersionResource) []runtime.Key {
	x := d.Op.GetIndex(index)
	if x == nil {
		return nil
	}
	var out []runtime.Key
	for _, v := range x.Get(key) {
		if s, ok := v.(string); ok {
			ns, name, namespaced := strings.Cut(s, "/")
			if !namespaced {
				ns, name = "", s
			}
			out = append(out, runtime.Key{Resource: resource, Namespace: ns, Name: name})
		}
	}
	return out
}
