// Package echobasic is Tailplane's stand-in for the Gateway API conformance
// suite's echo-basic image (registry.k8s.io/gateway-api/echo-basic): the
// backends of the suite's base manifests run it on devcluster's real node,
// where no registry is reachable, through the image map of the conformance
// runner (kind-e2e/gatewayconformance).
//
// echo-basic is a nested module that the Go module proxy does not serve, so
// this package reimplements what the suite depends on, as the suite's own
// parsers read it (conformance/utils/http, utils/grpc, utils/tcp, utils/udp):
//
//   - HTTP/1.1 on HTTP_PORT (3000), h2c on H2C_PORT (3001) and, with
//     TLS_SERVER_CERT and TLS_SERVER_PRIVKEY, HTTPS on HTTPS_PORT (8443)
//     (client certificates verified against TLS_CLIENT_CACERTS when set):
//     a JSON echo of path, host, method, proto, headers, httpPort,
//     namespace, ingress, service, pod and, over TLS, the connection's TLS
//     facts; /health, /status/NNN, /retry/, /ws (a WebSocket echo),
//     ?delay= and X-Echo-Set-Header as echo-basic has them.
//   - GRPC_ECHO_SERVER: the gRPC echo service
//     gateway_api_conformance.echo_basic.grpcecho.GrpcEcho on HTTP_PORT, and
//     over TLS on HTTPS_PORT with TLS_SERVER_CERT and TLS_SERVER_PRIV_KEY.
//   - TCP_ECHO_SERVER: the line protocol of echo-basic's tcpserver on
//     TCP_PORT (3000) and, over TLS, TLS_PORT (8443).
//   - UDP_ECHO_SERVER: a JSON answer to each datagram on UDP_PORT (8080).
//   - Arguments "-conf FILE" (the base manifests' CoreDNS, image
//     registry.k8s.io/coredns/coredns): a DNS server on port 53 that answers
//     the zones the Corefile gives the whoami plugin as whoami does, and
//     refuses every other name; it never forwards, so no query leaves the
//     machine.
//
// The pod context comes from NAMESPACE, INGRESS_NAME, SERVICE_NAME and
// POD_NAME, as in echo-basic.
//
// It may import the standard library, golang.org/x/net, gRPC, miekg/dns,
// charmbracelet/log and the conformance module's generated echo service
// (sigs.k8s.io/gateway-api/conformance/echo-basic/grpcechoserver, the
// protocol's own definition); nothing of Tailplane.
package echobasic
