package ingress

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/handlers/lib/settings"
	"github.com/tailplane/tailplane/proxy/config"
)

// ProxyClassName is the ProxyClass the Ingress asks for (label, annotation,
// then PROXY_DEFAULT_CLASS).
func ProxyClassName(ing *networkingv1.Ingress, s settings.Settings) string {
	return proxyset.ProxyClassName(ing.Labels, ing.Annotations, s.DefaultProxyClass)
}

// Config is the ingress-l7 proxy config for ing, plus the Events to post.
func Config(ing *networkingv1.Ingress, s settings.Settings, lookup ServiceLookup, loginServer, authKey string) (*config.Config, []Problem, error) {
	hostname, err := Hostname(ing)
	if err != nil {
		return nil, nil, err
	}
	tags, err := proxyset.Tags(ing.Annotations, s.ProxyTags)
	if err != nil {
		return nil, nil, err
	}
	l7, problems, err := L7(ing, lookup)
	if err != nil {
		return nil, problems, err
	}
	l7.HTTPRedirect = HTTPRedirect(ing)
	l7.Funnel = Funnel(ing)
	if customTLS(ing) {
		l7.TLS = config.TLS{Mode: config.TLSSecret, SecretName: TLSSecretName(ing)}
	}
	return &config.Config{
		Version:     config.Version,
		Hostname:    hostname,
		Tags:        tags,
		LoginServer: loginServer,
		AuthKey:     authKey,
		Role:        config.RoleIngressL7,
		L7:          l7,
	}, problems, nil
}

// Render returns the proxy objects for ing and the Events to post. With no
// servable backend it returns ErrNoValidBackends (and the NoValidBackends
// Event) and no objects.
func Render(ing *networkingv1.Ingress, s settings.Settings, lookup ServiceLookup, loginServer, authKey string) (*proxyset.Objects, []Problem, error) {
	return RenderWithPlugins(ing, s, lookup, loginServer, authKey, nil, nil)
}

// RenderWithPlugins is Render for an Ingress targeted by routing plugins:
// their config entries go into the proxy config, in order, and the Secrets
// holding their modules (in the operator namespace) into the proxy's Role.
func RenderWithPlugins(ing *networkingv1.Ingress, s settings.Settings, lookup ServiceLookup, loginServer, authKey string, plugins []config.Plugin, pluginSecrets []string) (*proxyset.Objects, []Problem, error) {
	cfg, problems, err := Config(ing, s, lookup, loginServer, authKey)
	if err != nil {
		return nil, problems, err
	}
	cfg.Plugins = plugins
	spec := proxyset.Spec{
		Parent:    Parent(ing),
		Namespace: s.Namespace,
		Image:     s.ProxyImage,
		Configs:   []*config.Config{cfg},
		ACME:      s.ProxyACME,
	}
	if customTLS(ing) {
		spec.ExtraSecrets = []string{TLSSecretName(ing)}
	}
	spec.ExtraSecrets = append(spec.ExtraSecrets, pluginSecrets...)
	objs, err := proxyset.Render(spec)
	if err != nil {
		return nil, problems, fmt.Errorf("render proxy for Ingress %s/%s: %w", ing.Namespace, ing.Name, err)
	}
	return objs, problems, nil
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
