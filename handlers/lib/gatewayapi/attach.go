package gatewayapi

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// attachment is a route attached to one listener, with the hostnames it
// answers there (the route's intersected with the listener's; none is any).
type attachment struct {
	listener  *listener
	hostnames []string
}

// parentResult is how one parentRef of a route to this Gateway attaches:
// to some listeners, or not at all and why.
type parentResult struct {
	ref         gatewayv1.ParentReference
	attached    []attachment
	notAccepted *unresolved
}

// attach works out, for each parentRef of r that names gw, the listeners
// it attaches to: those its sectionName and port select, that are
// attachable (accepted and without conflict; one whose references do not
// resolve still counts its routes, unprogrammed),
// whose allowedRoutes admit the route's kind and namespace, and whose
// hostname intersects the route's hostnames. Each listener it attaches to
// counts the route once in attachedRoutes.
func attach(r *Route, gw *gatewayv1.Gateway, ls []*listener, nsLabels func(string) (map[string]string, error)) ([]parentResult, error) {
	var out []parentResult
	counted := map[*listener]bool{}
	for _, ref := range r.ParentRefs {
		if !RefersTo(r.Namespace, ref, gw.Namespace, gw.Name) {
			continue
		}
		res := parentResult{ref: ref}
		var selected []*listener
		for _, l := range ls {
			if ref.SectionName != nil && *ref.SectionName != l.spec.Name || ref.Port != nil && *ref.Port != l.spec.Port {
				continue
			}
			selected = append(selected, l)
		}
		if len(selected) == 0 {
			res.notAccepted = &unresolved{string(gatewayv1.RouteReasonNoMatchingParent), noListenerMessage(ref)}
			out = append(out, res)
			continue
		}
		var allowed []*listener
		for _, l := range selected {
			ok, err := admits(l, r, gw.Namespace, nsLabels)
			if err != nil {
				return nil, err
			}
			if ok && l.attachable() {
				allowed = append(allowed, l)
			}
		}
		if len(allowed) == 0 {
			res.notAccepted = &unresolved{string(gatewayv1.RouteReasonNotAllowedByListeners),
				fmt.Sprintf("no valid listener of Gateway %s/%s allows %s routes from namespace %s", gw.Namespace, gw.Name, r.Kind, r.Namespace)}
			out = append(out, res)
			continue
		}
		for _, l := range allowed {
			hostnames, ok := intersect(hostnameOf(l.spec.Hostname), r.Hostnames)
			if !ok {
				continue
			}
			res.attached = append(res.attached, attachment{listener: l, hostnames: hostnames})
			if !counted[l] {
				counted[l] = true
				l.attached++
			}
		}
		if len(res.attached) == 0 {
			res.notAccepted = &unresolved{string(gatewayv1.RouteReasonNoMatchingListenerHostname),
				fmt.Sprintf("no hostname of the route matches a listener hostname of Gateway %s/%s", gw.Namespace, gw.Name)}
		}
		out = append(out, res)
	}
	return out, nil
}

func noListenerMessage(ref gatewayv1.ParentReference) string {
	switch {
	case ref.SectionName != nil && ref.Port != nil:
		return fmt.Sprintf("the Gateway has no listener %q on port %d", *ref.SectionName, *ref.Port)
	case ref.SectionName != nil:
		return fmt.Sprintf("the Gateway has no listener %q", *ref.SectionName)
	default:
		return fmt.Sprintf("the Gateway has no listener on port %d", *ref.Port)
	}
}

// admits reports whether listener l takes route r: its kind is among the
// listener's kinds, and its namespace is allowed (Same, the default: the
// Gateway's own; All; Selector: namespaces whose labels match).
func admits(l *listener, r *Route, gwNamespace string, nsLabels func(string) (map[string]string, error)) (bool, error) {
	kindOK := false
	for _, k := range l.kinds {
		if string(k.Kind) == r.Kind {
			kindOK = true
		}
	}
	if !kindOK {
		return false, nil
	}
	from := gatewayv1.NamespacesFromSame
	var selector *metav1.LabelSelector
	if ar := l.spec.AllowedRoutes; ar != nil && ar.Namespaces != nil {
		if ar.Namespaces.From != nil {
			from = *ar.Namespaces.From
		}
		selector = ar.Namespaces.Selector
	}
	switch from {
	case gatewayv1.NamespacesFromAll:
		return true, nil
	case gatewayv1.NamespacesFromSelector:
		if selector == nil {
			return false, nil
		}
		sel, err := metav1.LabelSelectorAsSelector(selector)
		if err != nil {
			return false, nil
		}
		set, err := nsLabels(r.Namespace)
		if err != nil {
			return false, fmt.Errorf("read namespace %s: %w", r.Namespace, err)
		}
		return sel.Matches(labels.Set(set)), nil
	default:
		return r.Namespace == gwNamespace, nil
	}
}

// intersect is the hostnames a route answers on a listener: the route's
// hostnames that the listener's hostname takes (the more specific of two
// that overlap), the listener's hostname for a route without any, and none
// (any host) when neither has one. ok is false when they do not overlap.
func intersect(listener string, route []gatewayv1.Hostname) ([]string, bool) {
	if len(route) == 0 {
		if listener == "" {
			return nil, true
		}
		return []string{listener}, true
	}
	var out []string
	for _, h := range route {
		rh := strings.ToLower(string(h))
		switch {
		case listener == "" || rh == listener:
			out = append(out, rh)
		case wildcardTakes(listener, rh):
			out = append(out, rh)
		case wildcardTakes(rh, listener):
			out = append(out, listener)
		}
	}
	return dedupe(out), len(out) > 0
}

// wildcardTakes reports whether wildcard ("*.example.com") takes host:
// any name with at least one more label before its suffix, itself a
// wildcard or not ("a.example.com", "*.a.example.com").
func wildcardTakes(wildcard, host string) bool {
	suffix, ok := strings.CutPrefix(wildcard, "*")
	return ok && host != wildcard && strings.HasSuffix(host, suffix)
}

func dedupe(list []string) []string {
	seen := map[string]bool{}
	out := list[:0]
	for _, s := range list {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
