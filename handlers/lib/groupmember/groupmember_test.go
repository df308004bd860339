package groupmember

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/tailplane/tailplane/internal/tailnet"
	"github.com/tailplane/tailplane/proxy/config"
	"github.com/tailplane/tailplane/runtime"
)

// kind is a member kind with fixed members.
type kind struct {
	keys   []runtime.Key
	hosted []Hosted
}

func (k kind) Keys(string) []runtime.Key { return k.keys }

type hostingKind struct{ kind }

func (k hostingKind) Services(context.Context, string) ([]Hosted, error) { return k.hosted, nil }

type egressKind struct{ kind }

func (k egressKind) EgressClaims(context.Context, string) ([]EgressClaim, error) {
	return []EgressClaim{{Key: k.keys[0]}}, nil
}

// The registry asks every kind for keys, and only the kinds that offer
// them for services or egress claims, in the order the kinds joined.
func TestRegistryAsksTheKindsThatOffer(t *testing.T) {
	var r Registry
	r.Add(hostingKind{kind{keys: []runtime.Key{{Name: "ing"}}, hosted: []Hosted{{Service: config.Service{Name: "svc:a"}}}}})
	r.Add(egressKind{kind{keys: []runtime.Key{{Name: "eg"}}}})
	r.Add(hostingKind{kind{keys: []runtime.Key{{Name: "svc"}}, hosted: []Hosted{{Service: config.Service{Name: "svc:b"}}}}})
	if got := fmt.Sprint(r.Keys("pg")); got != "[/ing /eg /svc]" {
		t.Errorf("keys %s", got)
	}
	hosted, err := r.Services(context.Background(), "pg")
	if err != nil || len(hosted) != 2 || hosted[0].Service.Name != "svc:a" || hosted[1].Service.Name != "svc:b" {
		t.Errorf("services %+v, %v", hosted, err)
	}
	claims, err := r.EgressClaims(context.Background(), "pg")
	if err != nil || len(claims) != 1 || claims[0].Key.Name != "eg" {
		t.Errorf("claims %+v, %v", claims, err)
	}
}

// A member keeps its ports unless another member holds them now, takes the
// lowest free ones otherwise, and is refused once the range is used up.
func TestClusterServiceAllocatesPorts(t *testing.T) {
	m := &Egress{Namespace: "app", Name: "db", Group: "eg", Target: config.EgressTarget{FQDN: "db.tail.ts.net."},
		Ports: []corev1.ServicePort{{Port: 5432}, {Port: 53, Protocol: corev1.ProtocolUDP}}}
	cs, err := ClusterService(m, "tailscale", nil, map[int32]bool{egressPortMin: true})
	if err != nil {
		t.Fatal(err)
	}
	if cs.Name != ClusterServiceName("app", "db") || cs.Namespace != "tailscale" || cs.Labels[LabelProxyGroup] != "eg" ||
		cs.Spec.Ports[0].TargetPort.IntVal != egressPortMin+1 || cs.Spec.Ports[1].TargetPort.IntVal != egressPortMin+2 {
		t.Fatalf("cluster Service %+v", cs)
	}
	// Kept, except the port another member took since.
	again, err := ClusterService(m, "tailscale", cs, map[int32]bool{egressPortMin + 2: true})
	if err != nil || again.Spec.Ports[0].TargetPort.IntVal != egressPortMin+1 || again.Spec.Ports[1].TargetPort.IntVal != egressPortMin {
		t.Fatalf("again %+v, %v", again.Spec.Ports, err)
	}
	if UpToDate(cs, again) || !UpToDate(again, again) {
		t.Error("UpToDate")
	}
	target, ok := TargetOf(again)
	if !ok || target.FQDN != "db.tail.ts.net." || target.Ports[1] != (config.PortMap{Protocol: config.UDP, Port: egressPortMin, TargetPort: 53}) {
		t.Errorf("target %+v", target)
	}
	full := map[int32]bool{}
	for p := int32(egressPortMin); p < egressPortMax; p++ {
		full[p] = true
	}
	if _, err := ClusterService(m, "tailscale", nil, full); err == nil || !strings.Contains(err.Error(), "no free egress port") {
		t.Errorf("full range: %v", err)
	}
}

func TestClusterServiceName(t *testing.T) {
	long := strings.Repeat("a", 60)
	if got := ClusterServiceName("app", long); !strings.HasPrefix(got, "ts-"+strings.Repeat("a", 40)+"-") || len(got) != 3+40+1+8 {
		t.Errorf("long name: %s", got)
	}
	if ClusterServiceName("a", "b-c") == ClusterServiceName("a-b", "c") {
		t.Error("two members, one name")
	}
}

func TestSharedWithNamesOperatorsByDevice(t *testing.T) {
	devices := []tailnet.Device{{ID: "n1", Name: "tailscale-operator-1.tail1.ts.net"}, {ID: "n9", Name: "other.tail1.ts.net"}}
	got := SharedWith([]string{"n1", "nGone"}, devices)
	if len(got) != 2 || got[0] != "tailscale-operator-1.tail1.ts.net (n1)" || got[1] != "nGone" {
		t.Errorf("SharedWith = %q", got)
	}
	msg := SharedMessage("svc:web", "Ingress", got[:1])
	if !strings.Contains(msg, "svc:web is also served by the operator of another cluster: tailscale-operator-1.tail1.ts.net (n1);") ||
		!strings.Contains(msg, "deleting this Ingress or its ProxyGroup withdraws only this cluster's proxies") {
		t.Errorf("one other cluster: %s", msg)
	}
	if msg := SharedMessage("svc:web", "Service", got); !strings.Contains(msg, "of 2 other clusters: ") {
		t.Errorf("two other clusters: %s", msg)
	}
}
