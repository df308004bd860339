package adoption_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tailplane/tailplane/handlers/lib/adoption"
)

func TestPlanHandBack(t *testing.T) {
	state := corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "ts-web-1a2b3c4d-0"}, Data: map[string][]byte{
		"_machinekey": []byte("k"), "device_id": []byte("n1"), "config_error": []byte("x"), "web.ts.net.crt": []byte("c")}}

	single, err := adoption.PlanHandBack(adoption.HandBackProxy{Type: "connector", Namespace: "", Name: "cn", Base: "ts-web-1a2b3c4d",
		States: []corev1.Secret{state}}, "tailscale")
	if err != nil {
		t.Fatal(err)
	}
	if single.Headless == nil || single.Headless.Name != "ts-web-1a2b3c4d" || single.Headless.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Fatalf("headless Service: %+v", single.Headless)
	}
	r := single.Replicas[0]
	if r.State.Name != state.Name || r.Config != nil || r.State.Labels["tailscale.com/parent-resource-ns"] != "" ||
		r.State.Labels["tailscale.com/parent-resource-type"] != "connector" || len(r.State.Labels) != 4 {
		t.Errorf("Connector replica: %+v", r)
	}
	if _, ok := r.State.Data["config_error"]; ok || string(r.State.Data["device_id"]) != "n1" || string(r.State.Data["web.ts.net.crt"]) != "c" {
		t.Errorf("kept keys: %v", r.State.Data)
	}

	owner := &metav1.OwnerReference{Kind: "ProxyGroup", Name: "pg", UID: "u1"}
	state.Name = "ts-pg-0a0b0c0d-1"
	group, err := adoption.PlanHandBack(adoption.HandBackProxy{Type: "proxygroup", Name: "pg", Base: "ts-pg-0a0b0c0d",
		States: []corev1.Secret{state}, Owner: owner}, "tailscale")
	if err != nil {
		t.Fatal(err)
	}
	g := group.Replicas[0]
	if group.Headless != nil || g.State.Name != "pg-1" || g.Config.Name != "pg-1-config" || g.From != "ts-pg-0a0b0c0d-1" ||
		g.State.Labels["tailscale.com/secret-type"] != "state" || g.Config.Labels["tailscale.com/secret-type"] != "config" ||
		len(g.Config.Data) != 0 || g.State.OwnerReferences[0].UID != "u1" {
		t.Errorf("group replica: %+v", g)
	}
	if _, err := adoption.PlanHandBack(adoption.HandBackProxy{Type: "proxygroup", Name: "pg", Base: "ts-pg-0a0b0c0d", States: []corev1.Secret{state}}, "tailscale"); err == nil {
		t.Error("a group without its owner: no error")
	}
	if _, err := adoption.PlanHandBack(adoption.HandBackProxy{Type: "gateway", Name: "gw"}, "tailscale"); err == nil || !strings.Contains(err.Error(), `"gateway"`) {
		t.Errorf("a Gateway's proxy: %v, want the official operator has none", err)
	}
}
