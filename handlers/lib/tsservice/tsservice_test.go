package tsservice

import (
	"strings"
	"testing"

	"github.com/tailplane/tailplane/internal/tailnet"
)

func TestDesiredOwnership(t *testing.T) {
	web := Owner{Kind: "Ingress", Namespace: "ns", Name: "web", UID: "u1"}
	tags, ports := []string{"tag:k8s"}, []string{"tcp:443"}
	fresh, err := Desired(web, "web", tags, ports, nil, "op1")
	if err != nil || fresh.Name != "svc:web" || !web.Owns(&fresh, "op1") || len(fresh.Addrs) != 0 {
		t.Fatalf("new service %+v, %v", fresh, err)
	}
	fresh.Addrs = []string{"100.100.0.1"}
	again, err := Desired(web, "web", tags, ports, &fresh, "op1")
	if err != nil || again.Addrs[0] != "100.100.0.1" || !Same(again, fresh) {
		t.Errorf("own service not kept: %+v, %v", again, err)
	}
	other := Owner{Kind: "Ingress", Namespace: "ns", Name: "other"}
	if _, err := Desired(other, "web", tags, ports, &fresh, "op1"); err == nil || !strings.Contains(err.Error(), "already used by Ingress ns/web") {
		t.Errorf("another object: %v", err)
	}
	if other.Owns(&fresh, "op1") || web.Owns(&fresh, "op2") {
		t.Error("owned by another object or operator")
	}
	if _, err := Desired(web, "web", tags, ports, &fresh, "op2"); err == nil || !strings.Contains(err.Error(), "another operator") {
		t.Errorf("another operator: %v", err)
	}
	if _, err := Desired(web, "web", tags, ports, &tailnet.Service{Name: "svc:web"}, "op1"); err == nil || !strings.Contains(err.Error(), "not managed") {
		t.Errorf("hand-made: %v", err)
	}
}

func TestShadowingDevice(t *testing.T) {
	devices := []tailnet.Device{{Name: "my-app.tail1.ts.net"}, {Name: "other.tail1.ts.net"}}
	if got := ShadowingDevice(devices, "My-App"); got != "my-app.tail1.ts.net" {
		t.Errorf("shadowed: %q", got)
	}
	if got := ShadowingDevice(devices, "my"); got != "" {
		t.Errorf("prefix only: %q", got)
	}
}
