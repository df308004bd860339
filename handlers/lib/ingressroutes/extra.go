package ingressroutes

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/tailplane/tailplane/proxy/config"
)

// AnnotationExtraBackends lists Services of the Ingress's namespace that
// every route of the Ingress also offers to routing plugins, beyond its own
// backend: "web-canary:80, web-v3:http" (service:port, the port a number or
// a port name). Only a plugin's set_backend sends traffic there, so a
// canary needs no rule of its own. The operator resolves them to ClusterIPs
// and re-renders the proxy when they change, as it does for rule backends.
const AnnotationExtraBackends = "tailplane.dev/extra-backends"

// extraRef is one entry of AnnotationExtraBackends.
type extraRef struct {
	entry   string // as written, for messages
	service string
	port    networkingv1.ServiceBackendPort
}

// extraRefs parses AnnotationExtraBackends; malformed entries become
// problems and are skipped.
func extraRefs(ing *networkingv1.Ingress) ([]extraRef, []Problem) {
	raw := strings.TrimSpace(ing.Annotations[AnnotationExtraBackends])
	if raw == "" {
		return nil, nil
	}
	var refs []extraRef
	var problems []Problem
	for entry := range strings.SplitSeq(raw, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		svc, port, ok := strings.Cut(entry, ":")
		ref := extraRef{entry: entry, service: svc}
		if n, err := strconv.ParseInt(port, 10, 32); err == nil {
			ref.port.Number = int32(n)
		} else {
			ref.port.Name = port
		}
		if !ok || svc == "" || port == "" || strings.Contains(svc, "/") || ref.port.Number < 0 || ref.port.Number > 65535 {
			problems = append(problems, Problem{Type: corev1.EventTypeWarning, Reason: ReasonInvalidIngressBackend,
				Message: fmt.Sprintf("annotation %s: entry %q is not <service>:<port> (a Service of namespace %s, the port a number or a port name); it is ignored", AnnotationExtraBackends, entry, ing.Namespace)})
			continue
		}
		refs = append(refs, ref)
	}
	return refs, problems
}

// extraBackends resolves AnnotationExtraBackends like rule backends (same
// names, "<namespace>/<service>:<port>"); unresolvable entries become
// problems and are left out. The error is a failed lookup (retried).
func extraBackends(ing *networkingv1.Ingress, lookup ServiceLookup) ([]config.Backend, []Problem, error) {
	refs, problems := extraRefs(ing)
	warn := func(ref extraRef, format string, args ...any) {
		problems = append(problems, Problem{Type: corev1.EventTypeWarning, Reason: ReasonInvalidIngressBackend,
			Message: fmt.Sprintf("annotation %s: entry %q: ", AnnotationExtraBackends, ref.entry) + fmt.Sprintf(format, args...) + "; it is ignored"})
	}
	var out []config.Backend
	seen := map[string]bool{}
	for _, ref := range refs {
		svc, err := lookup(ref.service)
		if err != nil {
			return nil, nil, fmt.Errorf("look up Service %s/%s: %w", ing.Namespace, ref.service, err)
		}
		if svc == nil {
			warn(ref, "Service %s/%s not found", ing.Namespace, ref.service)
			continue
		}
		if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone {
			warn(ref, "Service %s/%s has no ClusterIP", ing.Namespace, ref.service)
			continue
		}
		port := servicePort(svc, ref.port)
		if port == 0 {
			warn(ref, "Service %s/%s has no port %s", ing.Namespace, ref.service, portText(ref.port))
			continue
		}
		b := config.Backend{
			Service: fmt.Sprintf("%s/%s:%d", ing.Namespace, svc.Name, port),
			Address: net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(int(port))),
			HTTPS:   port == 443 || ref.port.Name == "https",
		}
		if !seen[b.Service] {
			seen[b.Service] = true
			out = append(out, b)
		}
	}
	return out, problems, nil
}

// servicePort is the Service's port that p names (by number or name), or 0.
func servicePort(svc *corev1.Service, p networkingv1.ServiceBackendPort) int32 {
	for _, sp := range svc.Spec.Ports {
		if p.Name != "" && sp.Name == p.Name || p.Name == "" && sp.Port == p.Number {
			return sp.Port
		}
	}
	return 0
}

func portText(p networkingv1.ServiceBackendPort) string {
	if p.Name != "" {
		return strconv.Quote(p.Name)
	}
	return strconv.Itoa(int(p.Number))
}

// ExtraServices lists the Service names of AnnotationExtraBackends, for the
// "Ingresses by backend Service" index.
func ExtraServices(ing *networkingv1.Ingress) []string {
	refs, _ := extraRefs(ing)
	out := make([]string, 0, len(refs))
	for _, r := range refs {
		out = append(out, r.service)
	}
	return out
}
