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

// L7 builds the routing section of the proxy config: the default backend
// and every rule's paths whose backend resolves. Rules for a host other than
// tls[0].hosts[0] are skipped with an Event, unless the Ingress brings its
// own certificate (tls[0].secretName), where rules route by host. The
// returned problems are Events to post; ErrNoValidBackends is returned when
// nothing can be served.
func L7(ing *networkingv1.Ingress, lookup ServiceLookup) (*config.L7, []Problem, error) {
	var problems []Problem
	warn := func(reason, format string, args ...any) {
		problems = append(problems, Problem{Type: corev1.EventTypeWarning, Reason: reason, Message: fmt.Sprintf(format, args...)})
	}
	resolve := func(b *networkingv1.IngressBackend, path string) (*config.Backend, error) {
		if b.Service == nil {
			warn(ReasonInvalidIngressBackend, "backend for path %q is missing service", path)
			return nil, nil
		}
		svc, err := lookup(b.Service.Name)
		if err != nil {
			return nil, fmt.Errorf("look up Service %s/%s: %w", ing.Namespace, b.Service.Name, err)
		}
		if svc == nil {
			warn(ReasonInvalidIngressBackend, "failed to get service %q for path %q: Service %q not found", b.Service.Name, path, b.Service.Name)
			return nil, nil
		}
		if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone {
			warn(ReasonInvalidIngressBackend, "backend for path %q has invalid ClusterIP", path)
			return nil, nil
		}
		port := b.Service.Port.Number
		if name := b.Service.Port.Name; name != "" {
			port = 0
			for _, p := range svc.Spec.Ports {
				if p.Name == name {
					port = p.Port
				}
			}
		}
		if port == 0 {
			warn(ReasonInvalidIngressBackend, "backend for path %q has invalid port", path)
			return nil, nil
		}
		return &config.Backend{
			Service: fmt.Sprintf("%s/%s:%d", ing.Namespace, svc.Name, port),
			Address: net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(int(port))),
			HTTPS:   port == 443 || b.Service.Port.Name == "https",
		}, nil
	}

	if msg := IgnoredTLS(ing); msg != "" {
		warn(ReasonInvalidIngressConfiguration, "%s", msg)
	}
	l7 := &config.L7{}
	if b := ing.Spec.DefaultBackend; b != nil {
		be, err := resolve(b, "/")
		if err != nil {
			return nil, nil, err
		}
		l7.DefaultBackend = be
	}
	host := TLSHost(ing)
	byHost := map[string]int{} // host -> index in l7.Rules
	for _, r := range ing.Spec.Rules {
		ruleHost := r.Host
		switch {
		case ruleHost == "" || ruleHost == host && !CustomTLS(ing):
			ruleHost = "" // the device's own name
		case !CustomTLS(ing):
			warn(ReasonInvalidIngressBackend, "rule with host %q ignored, unsupported", r.Host)
			continue
		}
		if r.HTTP == nil {
			continue
		}
		for _, p := range r.HTTP.Paths {
			path := p.Path
			if path == "" {
				path = "/"
				problems = append(problems, Problem{Type: corev1.EventTypeNormal, Reason: ReasonPathUndefined, Message: "configured backend is missing a path, defaulting to '/'"})
			}
			be, err := resolve(&p.Backend, path)
			if err != nil {
				return nil, nil, err
			}
			if be == nil {
				continue
			}
			pathType := config.PathPrefix
			if p.PathType != nil {
				pathType = config.PathType(*p.PathType)
			}
			i, ok := byHost[ruleHost]
			if !ok {
				i = len(l7.Rules)
				byHost[ruleHost] = i
				l7.Rules = append(l7.Rules, config.Rule{Host: ruleHost})
			}
			l7.Rules[i].Paths = upsertPath(l7.Rules[i].Paths, config.Path{Path: path, PathType: pathType, Backend: *be})
		}
	}
	if len(l7.Rules) == 0 && l7.DefaultBackend == nil {
		problems = append(problems, Problem{Type: corev1.EventTypeWarning, Reason: ReasonNoValidBackends, Message: "no valid backends"})
		return nil, problems, ErrNoValidBackends
	}
	extra, extraProblems, err := extraBackends(ing, lookup)
	if err != nil {
		return nil, nil, err
	}
	l7.ExtraBackends, problems = extra, append(problems, extraProblems...)
	return l7, problems, nil
}

// IgnoredTLS describes the parts of spec.tls a dedicated proxy does not
// serve ("" when none): it takes its name from tls[0].hosts[0] and its
// certificate from tls[0].secretName, so further tls entries are ignored,
// and so are further hosts of tls[0] unless the Ingress brings its own
// certificate (then rules route by host). The official operator ignores them
// silently here and refuses them on ProxyGroup Ingresses.
func IgnoredTLS(ing *networkingv1.Ingress) string {
	tls := ing.Spec.TLS
	if len(tls) == 0 {
		return ""
	}
	var ignored []string
	if !CustomTLS(ing) && len(tls[0].Hosts) > 1 {
		ignored = append(ignored, fmt.Sprintf("hosts %q of tls[0]", tls[0].Hosts[1:]))
	}
	for i, t := range tls[1:] {
		entry := fmt.Sprintf("tls[%d] (hosts %q", i+1, t.Hosts)
		if t.SecretName != "" {
			entry += fmt.Sprintf(", secretName %q", t.SecretName)
		}
		ignored = append(ignored, entry+")")
	}
	if len(ignored) == 0 {
		return ""
	}
	served := "the default hostname"
	if h := TLSHost(ing); h != "" {
		served = fmt.Sprintf("%q", h)
	}
	return fmt.Sprintf("only a single TLS entry with a single host is supported: the proxy serves %s (tls[0]) and ignores %s",
		served, strings.Join(ignored, ", "))
}

// upsertPath adds p, replacing an earlier path of the same path and type: a
// later rule wins, as in the official operator.
func upsertPath(paths []config.Path, p config.Path) []config.Path {
	for i, q := range paths {
		if q.Path == p.Path && q.PathType == p.PathType {
			paths[i] = p
			return paths
		}
	}
	return append(paths, p)
}
