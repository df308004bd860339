package l7

import (
	"context"
	"errors"
	"testing"

	"github.com/tailplane/tailplane/proxy/route"
)

func TestChainOrderNarrowingAndErrors(t *testing.T) {
	var order []string
	step := func(name string, f func(route.Decision) route.Decision) route.Router {
		return route.RouterFunc(func(_ context.Context, _ *route.Request, prev route.Decision) (route.Decision, error) {
			order = append(order, name)
			return f(prev), nil
		})
	}
	chain := Chain{
		step("table", func(d route.Decision) route.Decision { d.Backend = &route.Backend{Name: "a"}; return d }),
		step("narrow", func(d route.Decision) route.Decision { d.DenyPublic = true; return d }),
		step("widen", func(d route.Decision) route.Decision { d.DenyPublic = false; return d }),
	}
	d, err := chain.Route(context.Background(), &route.Request{}, route.Decision{})
	if err != nil {
		t.Fatal(err)
	}
	if len(order) != 3 || order[0] != "table" || order[2] != "widen" {
		t.Errorf("order %v", order)
	}
	if !d.DenyPublic {
		t.Error("a later router widened Funnel exposure")
	}
	if d.Backend == nil || d.Backend.Name != "a" {
		t.Errorf("decision lost along the chain: %+v", d)
	}
	boom := errors.New("boom")
	failing := Chain{route.RouterFunc(func(context.Context, *route.Request, route.Decision) (route.Decision, error) {
		return route.Decision{}, boom
	})}
	if _, err := failing.Route(context.Background(), &route.Request{}, route.Decision{}); !errors.Is(err, boom) {
		t.Errorf("error not propagated: %v", err)
	}
}
