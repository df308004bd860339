package ingressclass_test

import (
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tailplane/tailplane/handlers/ingressclass"
)

func class(controller string, annotations map[string]string) *networkingv1.IngressClass {
	return &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "tailscale", Annotations: annotations}, Spec: networkingv1.IngressClassSpec{Controller: controller}}
}

func TestCheck(t *testing.T) {
	if v := ingressclass.Check(class("tailscale.com/ts-ingress", nil), "tailscale"); v != (ingressclass.Verdict{}) {
		t.Fatalf("the shipped class: %+v", v)
	}
	v := ingressclass.Check(class("tailscale.com/ts-ingress", map[string]string{"ingressclass.kubernetes.io/is-default-class": "true"}), "tailscale")
	if !v.Refused || v.Reason != "DefaultIngressClassRefused" || !strings.Contains(v.ClassMessage, "remove the annotation") || !strings.Contains(v.IngressMessage, "not served") {
		t.Fatalf("default class: %+v", v)
	}
	if v := ingressclass.Check(class("tailscale.com/ts-ingress", map[string]string{"ingressclass.kubernetes.io/is-default-class": "false"}), "tailscale"); v.Refused {
		t.Fatal("is-default-class: false refused")
	}
	if v := ingressclass.Check(class("k8s.io/ingress-nginx", nil), "tailscale"); v.Refused || !strings.Contains(v.ClassMessage, `has controller "k8s.io/ingress-nginx"`) {
		t.Fatalf("other controller: %+v", v)
	}
	if v := ingressclass.Check(nil, "tailscale"); v.Refused || v.IngressMessage == "" {
		t.Fatalf("missing class: %+v", v)
	}
}
