package bench_test

import (
	"testing"
	"time"

	"github.com/tailplane/tailplane/plugins/internal/wasmbuild"
	"github.com/tailplane/tailplane/proxy/route"
)

// BenchmarkDecisionParts: where a Go guest's decision time goes. The same
// module (testdata/parts) takes the canary's steps one by one: calling into
// the guest with an empty handler (with and without the deadline's
// instrumentation), reading a header, listing the backends, setting one,
// and all three (the canary). The AssemblyScript guest and the native
// router run beside it for the ratios in docs/performance.md.
func BenchmarkDecisionParts(b *testing.B) {
	parts := func(tb testing.TB) []byte { return wasmbuild.Go(tb, "./plugins/bench/testdata/parts") }
	for _, v := range []struct {
		name, config string
		timeout      time.Duration
	}{
		{"go-empty-nodeadline", `{"steps":[]}`, -1},
		{"go-empty", `{"steps":[]}`, 0},
		{"go-header", `{"steps":["header"]}`, 0},
		{"go-backends", `{"steps":["backends"]}`, 0},
		{"go-set", `{"steps":["set"]}`, 0},
		{"go-canary", `{"steps":["header","backends","set"]}`, 0},
	} {
		b.Run(v.name, func(b *testing.B) {
			decideLoop(b, loadGuest(b, guestKind{v.name, parts, v.config, v.timeout}, 1, v.config))
		})
	}
	b.Run("as-canary", func(b *testing.B) {
		g := guests()[2]
		decideLoop(b, loadGuest(b, g, 1, g.config))
	})
	b.Run("native", func(b *testing.B) { decideLoop(b, nativeCanary()) })
}

func decideLoop(b *testing.B, r route.Router) {
	req := canaryRequest()
	if _, err := r.Route(b.Context(), req, route.Decision{}); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		_, _ = r.Route(b.Context(), req, route.Decision{})
	}
}
