package gatewayconformance

import (
	"context"
	"io"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/charmbracelet/log"
	. "github.com/onsi/gomega"
	"golang.org/x/net/websocket"
	pb "sigs.k8s.io/gateway-api/conformance/echo-basic/grpcechoserver"
	"sigs.k8s.io/gateway-api/conformance/utils/config"
	cgrpc "sigs.k8s.io/gateway-api/conformance/utils/grpc"
	chttp "sigs.k8s.io/gateway-api/conformance/utils/http"
	"sigs.k8s.io/gateway-api/conformance/utils/roundtripper"

	"github.com/tailplane/tailplane/kind-e2e/internal/echobasic"
)

// recordingDialer dials loopback with the host's network and records
// every address it is asked for: it stands in for the tsnet node, to
// prove that each of the suite's clients dials through the runner's
// dialer and hands it the address as the suite gave it.
type recordingDialer struct {
	mu    sync.Mutex
	addrs []string
}

func (d *recordingDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	d.addrs = append(d.addrs, addr)
	d.mu.Unlock()
	return (&net.Dialer{}).DialContext(ctx, network, addr)
}

func (d *recordingDialer) dialled() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.addrs)
}

// startEcho runs the echo-basic stand-in of mode on a loopback port.
func startEcho(t *testing.T, mode echobasic.Mode) *echobasic.Servers {
	t.Helper()
	c := echobasic.Config{Mode: mode, Host: "127.0.0.1", HTTPPort: "0", H2CPort: "0",
		Context: echobasic.PodContext{Namespace: "gateway-conformance-infra", Pod: "infra-backend-v1-abc"}}
	s, err := echobasic.Start(t.Context(), c, log.New(io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

func oneSuccess() config.TimeoutConfig {
	tc := config.DefaultTimeoutConfig()
	tc.RequiredConsecutiveSuccesses, tc.MaxTimeToConsistency = 1, 10*time.Second
	return tc
}

func TestGRPCClientDialsThroughTheTailnetDialer(t *testing.T) {
	g := NewWithT(t)
	s := startEcho(t, echobasic.ModeGRPC)
	d := &recordingDialer{}
	c := &tailnetGRPC{dial: d.dial}
	defer c.Close()
	_, port, err := net.SplitHostPort(s.Addrs["grpc"])
	g.Expect(err).NotTo(HaveOccurred())
	// A name, as a Gateway's Hostname address (its MagicDNS name) gives:
	// it reaches the dialer unresolved.
	byName := net.JoinHostPort("localhost", port)
	for _, addr := range []string{s.Addrs["grpc"], byName} {
		cgrpc.MakeRequestAndExpectEventuallyConsistentResponse(t, c, oneSuccess(), addr,
			cgrpc.ExpectedResponse{EchoRequest: &pb.EchoRequest{}, Backend: "infra-backend-v1", Namespace: "gateway-conformance-infra"})
	}
	g.Expect(d.dialled()).To(ContainElements(s.Addrs["grpc"], byName), "a new address is dialled anew")
	// The authority the suite sets reaches the backend.
	resp, err := c.SendRPC(t, byName, cgrpc.ExpectedResponse{EchoRequest: &pb.EchoRequest{},
		RequestMetadata: &cgrpc.RequestMetadata{Authority: "grpc.example.com"}}, 5*time.Second)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.Response.GetAssertions().GetAuthority()).To(Equal("grpc.example.com"))
}

func TestRoundTripperAndWebSocketDialThroughTheTailnetDialer(t *testing.T) {
	g := NewWithT(t)
	s := startEcho(t, echobasic.ModeHTTP)
	d := &recordingDialer{}
	rt := &roundtripper.DefaultRoundTripper{TimeoutConfig: oneSuccess(), CustomDialContext: d.dial}
	chttp.MakeRequestAndExpectEventuallyConsistentResponse(t, rt, oneSuccess(), s.Addrs["http"], chttp.ExpectedResponse{
		Request: chttp.Request{Host: "example.com", Path: "/"}, Backend: "infra-backend-v1", Namespace: "gateway-conformance-infra",
	})
	g.Expect(d.dialled()).To(ContainElement(s.Addrs["http"]))

	ws := tailnetWebSocket{ctx: t.Context(), dial: d.dial}
	conn, err := ws.Dial("ws://"+s.Addrs["http"]+"/ws", "", "http://example.com/")
	g.Expect(err).NotTo(HaveOccurred())
	defer conn.Close()
	g.Expect(websocket.Message.Send(conn, "hello")).To(Succeed())
	var echoed string
	g.Expect(websocket.Message.Receive(conn, &echoed)).To(Succeed())
	g.Expect(echoed).To(Equal("hello"))
	g.Expect(d.dialled()).To(HaveLen(2))
}
