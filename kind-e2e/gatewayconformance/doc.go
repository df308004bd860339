// Package gatewayconformance runs the Gateway API conformance suite,
// sigs.k8s.io/gateway-api/conformance v1.6.3 with its tests unmodified,
// against Tailplane on devcluster's real node (go tool task
// e2e:gateway-conformance; docs/gateway.md, "Conformance").
//
// Its one test, TestGatewayConformance, builds the operator and proxy images
// (deploy/images) and devcluster-echo-basic, the stand-in for the suite's
// echo-basic image (internal/echobasic), written as image archives under
// the very names the suite's manifests use; starts devcluster with the real
// node and installs the operator's chart with devinstall, as `go tool task
// dev` does (the chart's defaults install the Gateway API CRDs, and the
// operator creates GatewayClass tailscale); joins devcluster's tailnet with
// a tsnet client, through which the suite's RoundTripper and gRPC client
// dial the Gateways' tailnet addresses; then runs the suite's Setup (base
// manifests applied as they are), checks that every backend pod runs on the
// real node and answers as the suite's parsers expect, runs the suite and
// writes its ConformanceReport to docs/conformance/.
//
// The suite's own flags work after -args (-run-test, -skip-tests,
// -supported-features, -report-output, -debug ...), as with the suite's
// upstream runner.
//
// It may import the conformance module and the Gateway API's types,
// controller-runtime's client (the suite's), client-go, tsnet, gRPC,
// Gomega, kind-e2e/internal/realnode and (its tests of the clients against
// the stand-in) kind-e2e/internal/echobasic; the product module only
// through the commands it builds and runs.
package gatewayconformance
