package handlers_test

import (
	"testing"

	"github.com/tailplane/tailplane/handlers/lib/cluster"
	"github.com/tailplane/tailplane/handlers/lib/resources"
)

// A status written to an object deleted meanwhile is no error (the cycle
// would otherwise fail and retry an object that is gone); an existing
// object gets it.
func TestStatusOfAGoneObjectIsNoError(t *testing.T) {
	h := newHarness(t, nil)
	h.stop()
	d := &cluster.Deps{Dyn: h.dyn}
	status := map[string]any{"loadBalancer": map[string]any{"ingress": []any{map[string]any{"hostname": "web.tail1.ts.net"}}}}
	if err := d.PatchStatus(h.ctx(), resources.Services, h.ns, "gone", status); err != nil {
		t.Fatalf("status of a Service that does not exist: %v", err)
	}
	h.createService(loadBalancer("web", "other"))
	if err := d.PatchStatus(h.ctx(), resources.Services, h.ns, "web", status); err != nil {
		t.Fatal(err)
	}
	if got := h.service("web").Status.LoadBalancer.Ingress; len(got) != 1 || got[0].Hostname != "web.tail1.ts.net" {
		t.Fatalf("status not written: %+v", got)
	}
}
