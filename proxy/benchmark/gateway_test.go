package benchmark

import (
	"testing"

	"github.com/tailplane/tailplane/internal/tailnettest"
	"github.com/tailplane/tailplane/proxy/config"
)

// BenchmarkGatewayVsIngress runs, side by side, one tailplane-proxy build
// twice: as an Ingress's proxy (role ingress-l7, one Prefix rule) and as a
// Gateway's (role gateway, an HTTP listener with one HTTPRoute entry), both
// in plain HTTP on port 80 in front of the same loopback backend, driven
// by the same client node: what the Gateway API's route table costs
// against the Ingress table on the same request path.
func BenchmarkGatewayVsIngress(b *testing.B) {
	tn := tailnettest.New(b)
	backend := startBackend(b)
	proxyBin, _ := buildBinaries(b)
	client := tn.Node(b, "bench-client")
	be := config.Backend{Service: "bench", Address: backend}

	ingress := startTailplaneProxy(b, proxyBin, b.TempDir(), tn.ControlURL, &config.L7{PlainHTTP: true,
		Rules: []config.Rule{{Paths: []config.Path{{Path: "/", PathType: config.PathPrefix, Backend: be}}}}})
	gateway := startProxyConfig(b, proxyBin, b.TempDir(), &config.Config{
		Version: config.Version, Hostname: "bench-gateway", LoginServer: tn.ControlURL, Role: config.RoleGateway,
		Gateway: &config.Gateway{Listeners: []config.Listener{{Name: "http", Port: 80, Protocol: config.ListenerHTTP,
			HTTPRoutes: []config.HTTPRoute{{Name: "bench/web/0", Match: config.HTTPMatch{PathType: config.MatchPathPrefix, Path: "/"},
				Backends: []config.WeightedBackend{{Backend: be, Weight: 1}}}}}}},
	})
	// gateway first: ratio reports the first target over the second.
	pair := &sideBySide{targets: []*target{
		newTarget(b, client, "gateway", gateway.Process.Pid, "bench-gateway", nil),
		newTarget(b, client, "ingress", ingress.Process.Pid, "bench-proxy", nil),
	}}
	pair.run(b, "small", (*target).small, "req/s", "p99-ms", "cpu-us/req")
}
