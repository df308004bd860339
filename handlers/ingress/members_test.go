package ingress_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tailplane/tailplane/handlers/ingress"
	"github.com/tailplane/tailplane/handlers/lib/settings"
	"github.com/tailplane/tailplane/handlers/lib/tsservice"
)

func TestGroupMember(t *testing.T) {
	s := settings.Settings{ProxyTags: []string{"tag:k8s"}}
	lookup := func(name string) (*corev1.Service, error) {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.ServiceSpec{ClusterIP: "10.0.0.1"}}, nil
	}
	ing := func(ann map[string]string, tls ...networkingv1.IngressTLS) *networkingv1.Ingress {
		ann["tailscale.com/proxy-group"] = "pg"
		return &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", Annotations: ann},
			Spec: networkingv1.IngressSpec{TLS: tls, DefaultBackend: &networkingv1.IngressBackend{
				Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}}}}
	}
	m, _, err := ingress.GroupMember(ing(map[string]string{}, networkingv1.IngressTLS{Hosts: []string{"app.example"}}), s, lookup)
	if err != nil || m.ServiceName() != "svc:app" || strings.Join(m.Ports, ",") != "tcp:443" || m.Group != "pg" ||
		m.Service.L7.TLS.SecretName != tsservice.CertSecretName("app") {
		t.Fatalf("member %+v, %v", m, err)
	}
	m, problems, err := ingress.GroupMember(ing(map[string]string{"tailscale.com/http-endpoint": "enabled", "tailscale.com/http-redirect": "true",
		"tailscale.com/funnel": "true"}), s, lookup)
	if err != nil || !m.Service.L7.PlainHTTP || m.Service.L7.HTTPRedirect || strings.Join(m.Ports, ",") != "tcp:443,tcp:80" || len(problems) != 2 {
		t.Fatalf("http-endpoint member %+v, %v, %v", m, problems, err)
	}
	if m.ServiceName() != "svc:ns-web-ingress" {
		t.Errorf("default hostname: %s", m.ServiceName())
	}
	_, _, err = ingress.GroupMember(ing(map[string]string{}, networkingv1.IngressTLS{Hosts: []string{"a"}}, networkingv1.IngressTLS{Hosts: []string{"b"}}), s, lookup)
	if err == nil || !strings.Contains(err.Error(), "only a single TLS entry is allowed") {
		t.Errorf("two TLS entries: %v", err)
	}
	_, _, err = ingress.GroupMember(ing(map[string]string{}, networkingv1.IngressTLS{Hosts: []string{"a", "b"}}), s, lookup)
	if err == nil || !strings.Contains(err.Error(), "only a single host is allowed") {
		t.Errorf("two TLS hosts: %v", err)
	}
}
