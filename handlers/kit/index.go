package kit

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/tailplane/tailplane/handlers/proxyset"
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
)

// IndexParents registers the indexes that find parents from the objects they
// refer to (ProxyClass, IngressClass).
func (d *Deps) IndexParents() {
	byClass := func(obj *unstructured.Unstructured) map[string]any {
		name := proxyset.ProxyClassName(obj.GetLabels(), obj.GetAnnotations(), d.Settings.DefaultProxyClass)
		if name == "" {
			return nil
		}
		return map[string]any{name: obj.GetNamespace() + "/" + obj.GetName()}
	}
	d.Op.Index(Services, IndexServicesByProxyClass, byClass, d.Scope()...)
	d.Op.Index(Ingresses, IndexIngressesByProxyClass, byClass, d.Scope()...)
	d.Op.Index(Ingresses, IndexIngressesByClass, func(obj *unstructured.Unstructured) map[string]any {
		class, _, _ := unstructured.NestedString(obj.Object, "spec", "ingressClassName")
		if class == "" {
			return nil
		}
		return map[string]any{class: obj.GetNamespace() + "/" + obj.GetName()}
	}, d.Scope()...)
}

// ResyncIndexed resyncs the parents of parentType found under key in index.
func (d *Deps) ResyncIndexed(index, key, parentType string) {
	x := d.Op.GetIndex(index)
	if x == nil {
		return
	}
	for _, v := range x.Get(key) {
		if s, ok := v.(string); ok {
			ns, name := splitKey(s)
			d.Resync(parentType, ns, name)
		}
	}
}

func splitKey(s string) (string, string) {
	for i := 0; i < len(s); i++ {
		if s[i] == '/' {
			return s[:i], s[i+1:]
		}
	}
	return "", s
}
