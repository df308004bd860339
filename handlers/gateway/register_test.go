package gateway_test

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/tailplane/tailplane/handlers/gateway"
)

func gatewayNamed(ns, name string) *gatewayv1.Gateway {
	return &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}

// The conformance suite's base Gateways have names such as
// gateway-conformance-infra/same-namespace-with-https-listener, whose
// <namespace>-<name>-gateway is longer than a DNS label: the default is
// cut to one, and stays unique.
func TestDefaultHostname(t *testing.T) {
	if h, err := gateway.Hostname(gatewayNamed("default", "web")); err != nil || h != "default-web-gateway" {
		t.Errorf("short: %q, %v", h, err)
	}
	if h, err := gateway.Hostname(gatewayNamed("default", "web.example")); err != nil || h != "default-web-example-gateway" {
		t.Errorf("dotted: %q, %v", h, err)
	}
	long := gatewayNamed("gateway-conformance-infra", "same-namespace-with-https-listener")
	h, err := gateway.Hostname(long)
	if err != nil {
		t.Fatalf("long: %v", err)
	}
	if len(h) > 63 || !strings.HasPrefix(h, "gateway-conformance-infra-same-namespace") || !strings.HasSuffix(h, "-gateway") {
		t.Errorf("long: %q (%d characters)", h, len(h))
	}
	other, err := gateway.Hostname(gatewayNamed("gateway-conformance-infra", "same-namespace-with-https-listener-2"))
	if err != nil || other == h {
		t.Errorf("names sharing the cut prefix: %q and %q, %v", h, other, err)
	}
	// A prefix cut just after a hyphen does not leave two in a row.
	if h := gateway.DefaultHostname(gatewayNamed(strings.Repeat("a", 45), "b-cccccccccccccccc")); strings.Contains(h, "--") || len(h) > 63 {
		t.Errorf("cut at a hyphen: %q", h)
	}
	if _, err := gateway.Hostname(&gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "b",
		Annotations: map[string]string{"tailscale.com/hostname": strings.Repeat("x", 64)}}}); err == nil {
		t.Error("a hostname annotation longer than a label is an error")
	}
}
