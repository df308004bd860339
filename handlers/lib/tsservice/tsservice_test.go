package tsservice

import (
	"context"
	"strings"
	"testing"

	"github.com/tailplane/tailplane/internal/tailnet"
)

var (
	tags, ports = []string{"tag:k8s"}, []string{"tcp:443"}
	web         = Owner{Kind: "Ingress", Namespace: "ns", Name: "web", UID: "u1"}
	apiGroup    = Owner{Kind: "ProxyGroup", Name: "api", UID: "pg1"}
)

func desired(t *testing.T, o Owner, existing *tailnet.Service, operatorID string) Claim {
	t.Helper()
	c, err := Desired(o, "web", tags, ports, existing, operatorID)
	if err != nil {
		t.Fatalf("%s %s as %s: %v", o.Kind, o.Name, operatorID, err)
	}
	return c
}

func refusal(t *testing.T, o Owner, existing *tailnet.Service, operatorID, want string) {
	t.Helper()
	if _, err := Desired(o, "web", tags, ports, existing, operatorID); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("%s %s as %s: got %v, want an error with %q", o.Kind, o.Name, operatorID, err, want)
	}
}

// The owner references are the official operator's bytes, so that its
// instances in other clusters co-own what Tailplane made and the reverse.
func TestDesiredWritesOfficialOwnerReferences(t *testing.T) {
	c := desired(t, web, nil, "op1")
	if got := c.Service.Annotations[AnnotationOwnerReferences]; got != `{"ownerRefs":[{"operatorID":"op1"}]}` {
		t.Errorf("member's references: %s", got)
	}
	if got := c.Service.Annotations[AnnotationOwnerResources]; got != `{"op1":{"kind":"Ingress","name":"web","namespace":"ns","uid":"u1"}}` {
		t.Errorf("member's objects: %s", got)
	}
	if c.Service.Name != "svc:web" || len(c.Others) != 0 || !web.Owns(&c.Service, "op1") {
		t.Errorf("new service %+v", c)
	}
	api := desired(t, apiGroup, nil, "op1")
	if got := api.Service.Annotations[AnnotationOwnerReferences]; got != `{"ownerRefs":[{"operatorID":"op1","resource":{"kind":"ProxyGroup","name":"api","uid":"pg1"}}]}` {
		t.Errorf("kube-apiserver group's references: %s", got)
	}
	if _, ok := api.Service.Annotations[AnnotationOwnerResources]; ok || !apiGroup.Owns(&api.Service, "op1") {
		t.Errorf("kube-apiserver group's service: %+v", api.Service.Annotations)
	}
}

func TestDesiredSharesAcrossOperators(t *testing.T) {
	first := desired(t, web, nil, "op1").Service
	first.Addrs = []string{"100.100.0.1"}
	again := desired(t, web, &first, "op1")
	if again.Service.Addrs[0] != "100.100.0.1" || !Same(again.Service, first) {
		t.Errorf("own service not kept: %+v", again)
	}
	// The same Ingress in a second cluster joins, and each sees the other.
	shared := desired(t, web, &first, "op2")
	if got := shared.Service.Annotations[AnnotationOwnerReferences]; got != `{"ownerRefs":[{"operatorID":"op1"},{"operatorID":"op2"}]}` {
		t.Errorf("shared references: %s", got)
	}
	if len(shared.Others) != 1 || shared.Others[0] != "op1" || !web.Owns(&shared.Service, "op1") || !web.Owns(&shared.Service, "op2") {
		t.Errorf("shared service: %+v", shared)
	}
	if back := desired(t, web, &shared.Service, "op1"); len(back.Others) != 1 || back.Others[0] != "op2" || !Same(back.Service, shared.Service) {
		t.Errorf("first cluster after the second joined: %+v", back)
	}
	if o, others, ok := SharedMember(&shared.Service, "op2"); !ok || o.Name != "web" || o.Kind != "Ingress" || len(others) != 1 || others[0] != "op1" {
		t.Errorf("SharedMember as op2: %+v %v %v", o, others, ok)
	}
	if _, _, ok := SharedMember(&shared.Service, "op3"); ok {
		t.Error("SharedMember of an operator that does not own it")
	}
	// An official operator's service takes Tailplane in, and the reverse.
	official := &tailnet.Service{Name: "svc:web", Annotations: map[string]string{AnnotationOwnerReferences: `{"ownerRefs":[{"operatorID":"nOfficial"}]}`}}
	if c := desired(t, web, official, "op1"); len(c.Others) != 1 || c.Others[0] != "nOfficial" {
		t.Errorf("official co-owner: %+v", c)
	}
}

func TestDesiredRefuses(t *testing.T) {
	first := desired(t, web, nil, "op1").Service
	other := Owner{Kind: "Service", Namespace: "ns", Name: "other"}
	refusal(t, other, &first, "op1", "already used by Ingress ns/web")
	if other.Owns(&first, "op1") || web.Owns(&first, "op2") {
		t.Error("owned by another object or operator")
	}
	refusal(t, web, &tailnet.Service{Name: "svc:web"}, "op1", "not managed")
	api := desired(t, apiGroup, nil, "op1").Service
	refusal(t, web, &api, "op1", "already used by ProxyGroup api")
	refusal(t, web, &api, "op2", "already used by a ProxyGroup of another operator (device op1)")
	refusal(t, apiGroup, &api, "op2", "already used by a ProxyGroup of another operator (device op1)")
	refusal(t, apiGroup, &first, "op1", "already used by Ingress ns/web")
	shared := desired(t, web, &first, "op2").Service
	refusal(t, apiGroup, &shared, "op1", "cannot be shared")
	if _, err := Desired(web, "web", tags, ports, &tailnet.Service{Name: "svc:web", Annotations: map[string]string{AnnotationOwnerReferences: "{"}}, "op1"); err == nil || !strings.Contains(err.Error(), "not valid JSON") {
		t.Errorf("bad annotation: %v", err)
	}
}

// Tailplane before shared services named its member in its own reference;
// such a service is read as the object's and rewritten in the official
// shape.
func TestDesiredUpgradesEarlierReferences(t *testing.T) {
	old := &tailnet.Service{Name: "svc:web", Annotations: map[string]string{
		AnnotationOwnerReferences: `{"ownerRefs":[{"operatorID":"op1","resource":{"kind":"Ingress","name":"web","namespace":"ns","uid":"u1"}}]}`}}
	if !web.Owns(old, "op1") {
		t.Error("an earlier reference is not read as the object's")
	}
	c := desired(t, web, old, "op1")
	if got := c.Service.Annotations[AnnotationOwnerReferences]; got != `{"ownerRefs":[{"operatorID":"op1"}]}` {
		t.Errorf("rewritten references: %s", got)
	}
	refusal(t, Owner{Kind: "Ingress", Namespace: "ns", Name: "other"}, old, "op1", "already used by Ingress ns/web")
}

// fakeServices is a tailnet's Tailscale Services, the only part of the
// Backend that Sweep uses.
type fakeServices struct {
	tailnet.Backend
	services map[string]tailnet.Service
}

func (f *fakeServices) ListServices(context.Context) ([]tailnet.Service, error) {
	var out []tailnet.Service
	for _, s := range f.services {
		out = append(out, s)
	}
	return out, nil
}

func (f *fakeServices) PutService(_ context.Context, s tailnet.Service) error {
	f.services[s.Name] = s
	return nil
}

func (f *fakeServices) DeleteService(_ context.Context, name string) error {
	delete(f.services, name)
	return nil
}

func TestSweepWithdrawsOnlyItsOwnOperator(t *testing.T) {
	ctx := context.Background()
	shared := desired(t, web, &[]tailnet.Service{desired(t, web, nil, "op1").Service}[0], "op2").Service
	be := &fakeServices{services: map[string]tailnet.Service{"svc:web": shared}}
	// Kept: the object's current service stays.
	if err := Sweep(ctx, be, "op1", web, "svc:web"); err != nil || len(be.services) != 1 {
		t.Fatalf("kept service swept: %v %v", err, be.services)
	}
	if err := Sweep(ctx, be, "op1", web, ""); err != nil {
		t.Fatal(err)
	}
	left, ok := be.services["svc:web"]
	if !ok {
		t.Fatal("a service another cluster still owns was deleted")
	}
	if got := left.Annotations[AnnotationOwnerReferences]; got != `{"ownerRefs":[{"operatorID":"op2"}]}` {
		t.Errorf("references after the first cluster left: %s", got)
	}
	if got := left.Annotations[AnnotationOwnerResources]; got != `{"op2":{"kind":"Ingress","name":"web","namespace":"ns","uid":"u1"}}` {
		t.Errorf("objects after the first cluster left: %s", got)
	}
	// Another object of the second cluster leaves it alone.
	if err := Sweep(ctx, be, "op2", Owner{Kind: "Ingress", Namespace: "ns", Name: "other"}, ""); err != nil || len(be.services) != 1 {
		t.Fatalf("another object's sweep: %v %v", err, be.services)
	}
	if err := Sweep(ctx, be, "op2", web, ""); err != nil || len(be.services) != 0 {
		t.Errorf("the last owner's sweep left %v (%v)", be.services, err)
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
