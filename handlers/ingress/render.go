package ingress

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/tailplane/tailplane/handlers/lib/ingressroutes"
	"github.com/tailplane/tailplane/handlers/lib/pipeline"
	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/handlers/lib/settings"
	"github.com/tailplane/tailplane/internal/tailnet"
	"github.com/tailplane/tailplane/proxy/config"
)

// ProxyClassName is the ProxyClass the Ingress asks for (label, annotation,
// then PROXY_DEFAULT_CLASS).
func ProxyClassName(ing *networkingv1.Ingress, s settings.Settings) string {
	return proxyset.ProxyClassName(ing.Labels, ing.Annotations, s.DefaultProxyClass)
}

// Inputs are what an Ingress's plan needs besides the Ingress and the
// settings: what the cluster and the Ingress's tailnet say.
type Inputs struct {
	// Lookup reads the backend Services.
	Lookup ingressroutes.ServiceLookup
	// Tailnet is the backend of the Ingress's tailnet: a control server
	// without certificates or Funnel changes how the Ingress is served
	// (Certificates, FunnelRefused). Nil has every feature.
	Tailnet tailnet.Backend
	// Plugins are the config entries of the routing plugins targeting the
	// Ingress, in order, and PluginSecrets the Secrets holding their
	// modules (in the operator namespace).
	Plugins       []config.Plugin
	PluginSecrets []string
}

// Plan is the proxy ing asks for: one L7 replica serving its routes with
// its plugins, reading its TLS Secret's copy (which the caller adds as an
// extra object), or Invalid when its hostname, tags or certificates are
// refused; pipeline.Render turns it into the proxy's objects. It also
// returns the Events to post, and with no servable backend
// ErrNoValidBackends and no plan.
func Plan(ing *networkingv1.Ingress, s settings.Settings, in Inputs) (*pipeline.Plan, []ingressroutes.Problem, error) {
	hostname, err := Hostname(ing)
	var tags []string
	if err == nil {
		tags, err = proxyset.Tags(ing.Annotations, s.ProxyTags)
	}
	if err != nil {
		return &pipeline.Plan{Invalid: err.Error()}, nil, nil
	}
	plain, refused := Certificates(ing, in.Tailnet)
	if refused != "" {
		return &pipeline.Plan{Invalid: refused}, nil, nil
	}
	var problems []ingressroutes.Problem
	noFunnel := FunnelRefused(ing, in.Tailnet)
	if noFunnel != "" {
		problems = append(problems, ingressroutes.Problem{Type: corev1.EventTypeWarning, Reason: ReasonFunnelNotAllowed, Message: noFunnel})
	}
	// Rendered once here to learn what is servable before any key is
	// minted.
	_, found, err := Config(ing, s, in.Lookup)
	problems = append(problems, found...)
	if err != nil {
		return nil, problems, err
	}
	plan := &pipeline.Plan{
		Hostnames: []string{hostname}, Tags: tags, ProxyClass: ProxyClassName(ing, s),
		ExtraSecrets: in.PluginSecrets,
		Config: func(int) (*config.Config, error) {
			cfg, _, err := Config(ing, s, in.Lookup)
			if err != nil {
				return nil, err
			}
			cfg.Plugins = in.Plugins
			if noFunnel != "" {
				cfg.L7.Funnel = false
			}
			if plain {
				servePlainHTTP(cfg.L7)
			}
			return cfg, nil
		},
	}
	if ingressroutes.CustomTLS(ing) {
		plan.ExtraSecrets = append([]string{TLSSecretName(ing)}, plan.ExtraSecrets...)
	}
	return plan, problems, nil
}

// Config is the ingress-l7 proxy config for ing, plus the Events to post.
func Config(ing *networkingv1.Ingress, s settings.Settings, lookup ingressroutes.ServiceLookup) (*config.Config, []ingressroutes.Problem, error) {
	hostname, err := Hostname(ing)
	if err != nil {
		return nil, nil, err
	}
	tags, err := proxyset.Tags(ing.Annotations, s.ProxyTags)
	if err != nil {
		return nil, nil, err
	}
	l7, problems, err := ingressroutes.L7(ing, lookup)
	if err != nil {
		return nil, problems, err
	}
	l7.HTTPRedirect = HTTPRedirect(ing)
	l7.Funnel = Funnel(ing)
	if ingressroutes.CustomTLS(ing) {
		l7.TLS = config.TLS{Mode: config.TLSSecret, SecretName: TLSSecretName(ing)}
	}
	return &config.Config{
		Version:  config.Version,
		Hostname: hostname,
		Tags:     tags,
		Role:     config.RoleIngressL7,
		L7:       l7,
	}, problems, nil
}

// Parent is the proxyset parent of ing's proxy.
func Parent(ing *networkingv1.Ingress) proxyset.Parent {
	return proxyset.Parent{Type: proxyset.ParentIngress, Namespace: ing.Namespace, Name: ing.Name, UID: ing.UID, Role: Role}
}

// LoadBalancerIngress is the Ingress's status.loadBalancer.ingress once its
// proxy reported a device: the MagicDNS name with port 443, plus 80 when
// http-redirect is on. Nil while the device has no name yet.
func LoadBalancerIngress(ing *networkingv1.Ingress, dev proxyset.Device) []networkingv1.IngressLoadBalancerIngress {
	if dev.FQDN == "" {
		return nil
	}
	ports := []networkingv1.IngressPortStatus{{Port: 443, Protocol: corev1.ProtocolTCP}}
	if HTTPRedirect(ing) {
		ports = append(ports, networkingv1.IngressPortStatus{Port: 80, Protocol: corev1.ProtocolTCP})
	}
	return []networkingv1.IngressLoadBalancerIngress{{Hostname: dev.FQDN, Ports: ports}}
}
