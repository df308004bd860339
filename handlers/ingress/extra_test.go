package ingress_test

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/tailplane/tailplane/handlers/lib/ingressroutes"
	"github.com/tailplane/tailplane/proxy/config"
)

func TestExtraBackendsAnnotation(t *testing.T) {
	ing := seedIngress(t)
	ing.Annotations = map[string]string{ingressroutes.AnnotationExtraBackends: " web-canary:80, v3:https,missing:80, bad, other/ns:80, web-canary:http, v3:8443"}
	lookup := services(
		backendSvc("my-app", "10.0.0.1"),
		backendSvc("web-canary", "10.0.0.2"),
		backendSvc("v3", "10.0.0.3", corev1.ServicePort{Name: "https", Port: 443}),
	)
	l7, problems, err := ingressroutes.L7(ing, lookup)
	if err != nil {
		t.Fatal(err)
	}
	want := []config.Backend{
		{Service: "default/web-canary:80", Address: "10.0.0.2:80"},
		{Service: "default/v3:443", Address: "10.0.0.3:443", HTTPS: true},
	}
	if !reflect.DeepEqual(l7.ExtraBackends, want) {
		t.Fatalf("extra backends %+v, want %+v (web-canary:http is the same backend as web-canary:80)", l7.ExtraBackends, want)
	}
	var msgs []string
	for _, p := range problems {
		if p.Reason != ingressroutes.ReasonInvalidIngressBackend || p.Type != corev1.EventTypeWarning {
			t.Errorf("problem %+v", p)
		}
		msgs = append(msgs, p.Message)
	}
	all := strings.Join(msgs, "\n")
	for _, part := range []string{`entry "missing:80": Service default/missing not found`, `entry "bad" is not <service>:<port>`,
		`entry "other/ns:80" is not`, `entry "v3:8443": Service default/v3 has no port 8443`, ingressroutes.AnnotationExtraBackends} {
		if !strings.Contains(all, part) {
			t.Errorf("problems do not say %q:\n%s", part, all)
		}
	}
	got := ingressroutes.BackendServices(ing)
	for _, svc := range []string{"my-app", "web-canary", "v3", "missing"} {
		if !strings.Contains(strings.Join(got, ","), svc) {
			t.Errorf("BackendServices %v lacks %s: its changes would not re-render the Ingress", got, svc)
		}
	}
}
