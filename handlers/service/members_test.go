package service_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tailplane/tailplane/handlers/lib/settings"
	"github.com/tailplane/tailplane/handlers/service"
	"github.com/tailplane/tailplane/proxy/config"
)

func TestGroupMember(t *testing.T) {
	s := settings.Settings{ProxyTags: []string{"tag:k8s"}}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "dns", Namespace: "ns", Annotations: map[string]string{"tailscale.com/hostname": "resolver"}},
		Spec: corev1.ServiceSpec{ClusterIP: "10.0.0.9", Ports: []corev1.ServicePort{{Port: 53, Protocol: corev1.ProtocolUDP}, {Port: 53}}}}
	m, err := service.GroupMember(svc, s)
	if err != nil || m.ServiceName() != "svc:resolver" || strings.Join(m.Ports, ",") != "do-not-validate" ||
		m.Service.L4.Ports[0].Protocol != config.UDP || m.Service.L4.Ports[0].Target != "10.0.0.9:53" {
		t.Fatalf("member %+v, %v", m, err)
	}
	svc.Spec.Type = corev1.ServiceTypeExternalName
	if _, err := service.GroupMember(svc, s); err == nil || !strings.Contains(err.Error(), "ExternalName") {
		t.Errorf("ExternalName: %v", err)
	}
}
