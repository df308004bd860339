package echobasic_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	nethttp "net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/charmbracelet/log"
	"github.com/miekg/dns"
	. "github.com/onsi/gomega"
	"google.golang.org/grpc/codes"
	pb "sigs.k8s.io/gateway-api/conformance/echo-basic/grpcechoserver"
	"sigs.k8s.io/gateway-api/conformance/utils/config"
	cgrpc "sigs.k8s.io/gateway-api/conformance/utils/grpc"
	chttp "sigs.k8s.io/gateway-api/conformance/utils/http"
	"sigs.k8s.io/gateway-api/conformance/utils/kubernetes"
	"sigs.k8s.io/gateway-api/conformance/utils/roundtripper"
	"sigs.k8s.io/gateway-api/conformance/utils/tcp"
	"sigs.k8s.io/gateway-api/conformance/utils/udp"

	"github.com/tailplane/tailplane/kind-e2e/internal/echobasic"
)

// The pod context every test server runs with, as the base manifests set
// it from the downward API.
const (
	testNS  = "gateway-conformance-infra"
	testPod = "infra-backend-v1-5d6c7b9f-abcde"
)

// fastTimeouts are the suite's timeouts, with one success enough: a local
// server either answers right or not at all.
func fastTimeouts() config.TimeoutConfig {
	tc := config.DefaultTimeoutConfig()
	tc.RequiredConsecutiveSuccesses, tc.MaxTimeToConsistency = 1, 10*time.Second
	return tc
}

// start runs the servers of env's mode on loopback's free ports.
func start(t *testing.T, env map[string]string, args ...string) *echobasic.Servers {
	t.Helper()
	return startLogging(t, env, log.New(io.Discard), args...)
}

// startLogging is start with the servers' log going to logger.
func startLogging(t *testing.T, env map[string]string, logger *log.Logger, args ...string) *echobasic.Servers {
	t.Helper()
	env["NAMESPACE"], env["POD_NAME"], env["SERVICE_NAME"] = testNS, testPod, "infra-backend-v1"
	c, err := echobasic.FromEnv(func(k string) string { return env[k] }, args)
	if err != nil {
		t.Fatal(err)
	}
	c.Host = "127.0.0.1"
	c.HTTPPort, c.H2CPort, c.HTTPSPort, c.TCPPort, c.TLSPort, c.UDPPort, c.DNSPort = "0", "0", "0", "0", "0", "0", "0"
	s, err := echobasic.Start(t.Context(), c, logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// certFiles writes a self-signed certificate for example.com (made by the
// suite's own helper) and returns its PEM and the files' paths.
func certFiles(t *testing.T) (certPEM []byte, certFile, keyFile string) {
	t.Helper()
	secret := kubernetes.MustCreateSelfSignedCertSecret(t, testNS, "tls-checks-certificate", []string{"example.com"})
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "crt"), filepath.Join(dir, "key")
	for path, key := range map[string]string{certFile: "tls.crt", keyFile: "tls.key"} {
		if err := os.WriteFile(path, secret.Data[key], 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return secret.Data["tls.crt"], certFile, keyFile
}

// jsonKeys are the JSON names of v's fields: what the suite's parser
// reads.
func jsonKeys(v any) []string {
	var keys []string
	typ := reflect.TypeOf(v)
	for i := range typ.NumField() {
		name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			keys = append(keys, name)
		}
	}
	return keys
}

// expectKeys fails unless body, a JSON object, has every key of want but
// those skipped.
func expectKeys(g Gomega, body []byte, want any, skip ...string) {
	var got map[string]json.RawMessage
	g.Expect(json.Unmarshal(body, &got)).To(Succeed(), string(body))
	for _, k := range jsonKeys(want) {
		if !strings.Contains(" "+strings.Join(skip, " ")+" ", " "+k+" ") {
			g.Expect(got).To(HaveKey(k), "the suite's %T reads %q; the echo has none:\n%s", want, k, body)
		}
	}
}

func TestHTTPEchoAsTheSuiteReadsIt(t *testing.T) {
	g := NewWithT(t)
	s := start(t, map[string]string{})
	rt := &roundtripper.DefaultRoundTripper{TimeoutConfig: fastTimeouts()}
	// The suite's own request and comparison: path, host, method, headers,
	// namespace and pod (Backend is a prefix of the pod's name).
	chttp.MakeRequestAndExpectEventuallyConsistentResponse(t, rt, fastTimeouts(), s.Addrs["http"], chttp.ExpectedResponse{
		Request:   chttp.Request{Host: "example.com", Path: "/foo//bar?x=1", Headers: map[string]string{"X-Test": "yes"}},
		Backend:   "infra-backend-v1",
		Namespace: testNS,
	})
	req := chttp.MakeRequest(t, &chttp.ExpectedResponse{Request: chttp.Request{Path: "/echo"}}, s.Addrs["http"], "HTTP", "http")
	captured, _, err := rt.CaptureRoundTrip(req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(captured.Protocol).To(Equal("HTTP/1.1"))
	g.Expect(captured.HTTPPort).NotTo(BeEmpty())

	// Every field of CapturedRequest is in the JSON (tls only over TLS).
	body := get(t, "http://"+s.Addrs["http"]+"/echo", nil)
	expectKeys(g, body, roundtripper.CapturedRequest{}, "tls")

	// The response headers the suite asks the backend to set.
	resp, err := nethttp.DefaultClient.Do(mustRequest(t, "http://"+s.Addrs["http"]+"/", map[string]string{"X-Echo-Set-Header": "X-Foo: one, x-bar: two"}))
	g.Expect(err).NotTo(HaveOccurred())
	resp.Body.Close()
	g.Expect(resp.Header["X-Foo"]).To(Equal([]string{"one"}))
	g.Expect(resp.Header["X-Bar"]).To(Equal([]string{"two"})) // Go's client canonicalizes what it reads

	resp, err = nethttp.Get("http://" + s.Addrs["http"] + "/status/418")
	g.Expect(err).NotTo(HaveOccurred())
	resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(418))
}

func TestH2CEcho(t *testing.T) {
	g := NewWithT(t)
	s := start(t, map[string]string{})
	rt := &roundtripper.DefaultRoundTripper{TimeoutConfig: fastTimeouts()}
	req := chttp.MakeRequest(t, &chttp.ExpectedResponse{Request: chttp.Request{Path: "/h2c", Protocol: roundtripper.H2CPriorKnowledgeProtocol}}, s.Addrs["h2c"], "HTTP", "http")
	captured, res, err := rt.CaptureRoundTrip(req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.StatusCode).To(Equal(200))
	g.Expect(captured.Protocol).To(Equal("HTTP/2.0"))
	g.Expect(captured.Path).To(Equal("/h2c"))
	g.Expect(captured.Pod).To(Equal(testPod))

	// HTTP/1.1 without an h2c upgrade is refused, as by echo-basic.
	resp, err := nethttp.Get("http://" + s.Addrs["h2c"] + "/")
	g.Expect(err).NotTo(HaveOccurred())
	resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(nethttp.StatusBadRequest))
}

func TestHTTPSEchoReportsTLS(t *testing.T) {
	g := NewWithT(t)
	certPEM, certFile, keyFile := certFiles(t)
	caMap, ca, caKey := kubernetes.MustCreateCACertConfigMap(t, testNS, "ca")
	client := kubernetes.MustCreateCASignedClientCertSecret(t, testNS, "client", ca, caKey)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	g.Expect(os.WriteFile(caFile, []byte(caMap.Data["ca.crt"]), 0o600)).To(Succeed())
	s := start(t, map[string]string{"TLS_SERVER_CERT": certFile, "TLS_SERVER_PRIVKEY": keyFile, "TLS_CLIENT_CACERTS": caFile})

	roots := x509.NewCertPool()
	g.Expect(roots.AppendCertsFromPEM(certPEM)).To(BeTrue())
	pair, err := tls.X509KeyPair(client.Data["tls.crt"], client.Data["tls.key"])
	g.Expect(err).NotTo(HaveOccurred())
	c := &nethttp.Client{Transport: &nethttp.Transport{ForceAttemptHTTP2: true, TLSClientConfig: &tls.Config{
		ServerName: "example.com", RootCAs: roots, Certificates: []tls.Certificate{pair},
	}}}
	resp, err := c.Get("https://" + s.Addrs["https"] + "/tls")
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	g.Expect(err).NotTo(HaveOccurred())

	expectKeys(g, body, roundtripper.CapturedRequest{})
	var raw struct{ TLS json.RawMessage }
	g.Expect(json.Unmarshal(body, &raw)).To(Succeed())
	expectKeys(g, raw.TLS, roundtripper.TLS{})
	var captured roundtripper.CapturedRequest
	g.Expect(json.Unmarshal(body, &captured)).To(Succeed())
	g.Expect(captured.TLS.ServerName).To(Equal("example.com"))
	g.Expect(captured.TLS.Version).To(Equal("TLSv1.3"))
	g.Expect(captured.TLS.NegotiatedProtocol).To(Equal("h2"))
	g.Expect(captured.TLS.CipherSuite).NotTo(BeEmpty())
	g.Expect(captured.TLS.PeerCertificates).To(HaveLen(1))
	g.Expect(captured.Protocol).To(Equal("HTTP/2.0"))
}

func TestGRPCEchoAsTheSuiteReadsIt(t *testing.T) {
	g := NewWithT(t)
	s := start(t, map[string]string{"GRPC_ECHO_SERVER": "1"})
	client := &cgrpc.DefaultClient{}
	defer client.Close()
	// The suite's own comparison: method, namespace and pod.
	for _, exp := range []cgrpc.ExpectedResponse{
		{EchoRequest: &pb.EchoRequest{}, Backend: "infra-backend-v1", Namespace: testNS},
		{EchoTwoRequest: &pb.EchoRequest{}, Backend: "infra-backend-v1", Namespace: testNS},
		{EchoThreeRequest: &pb.EchoRequest{}, Response: cgrpc.Response{Code: codes.Unimplemented}},
	} {
		cgrpc.MakeRequestAndExpectEventuallyConsistentResponse(t, client, fastTimeouts(), s.Addrs["grpc"], exp)
	}
	resp, err := client.SendRPC(t, s.Addrs["grpc"], cgrpc.ExpectedResponse{
		EchoRequest:     &pb.EchoRequest{},
		RequestMetadata: &cgrpc.RequestMetadata{Metadata: map[string]string{"x-test": "yes"}},
	}, 5*time.Second)
	g.Expect(err).NotTo(HaveOccurred())
	a := resp.Response.GetAssertions()
	g.Expect(a.GetFullyQualifiedMethod()).To(Equal("/gateway_api_conformance.echo_basic.grpcecho.GrpcEcho/Echo"))
	g.Expect(a.GetAuthority()).To(Equal(s.Addrs["grpc"]))
	g.Expect(a.GetContext().GetPod()).To(Equal(testPod))
	g.Expect(a.GetContext().GetServiceName()).To(Equal("infra-backend-v1"))
	g.Expect(a.GetHeaders()).To(ContainElement(SatisfyAll(
		WithTransform((*pb.Header).GetKey, Equal("x-test")), WithTransform((*pb.Header).GetValue, Equal("yes")))))
	g.Expect(a.GetTlsAssertions()).To(BeNil())
}

func TestTCPEchoAsTheSuiteReadsIt(t *testing.T) {
	certPEM, certFile, keyFile := certFiles(t)
	s := start(t, map[string]string{"TCP_ECHO_SERVER": "1", "TLS_SERVER_CERT": certFile, "TLS_SERVER_PRIV_KEY": keyFile})
	tcp.MakeTCPRequestAndExpectEventuallyValidResponse(t, fastTimeouts(), s.Addrs["tcp"], nil, "", false,
		tcp.ExpectedResponse{Backend: "infra-backend-v1", Namespace: testNS})
	tcp.MakeTCPRequestAndExpectEventuallyValidResponse(t, fastTimeouts(), s.Addrs["tls"], certPEM, "example.com", true,
		tcp.ExpectedResponse{BackendIsTLS: true, Backend: "infra-backend-v1", Namespace: testNS, Hostname: "example.com"})
}

func TestUDPEchoAsTheSuiteReadsIt(t *testing.T) {
	s := start(t, map[string]string{"UDP_ECHO_SERVER": "1"})
	udp.ExpectEchoResponseFromBackend(t, 10*time.Second, s.Addrs["udp"], udp.ExpectedResponse{Service: "infra-backend-v1", Namespace: testNS})
}

func TestDNSStandInAnswersWhoamiAndForwardsNothing(t *testing.T) {
	g := NewWithT(t)
	corefile := filepath.Join(t.TempDir(), "Corefile")
	// The base manifests' Corefile, verbatim.
	g.Expect(os.WriteFile(corefile, []byte(".:53 {\n    forward . 8.8.8.8 9.9.9.9\n    log\n    errors\n}\nfoo.bar.com:53 {\n  whoami\n}\n"), 0o600)).To(Succeed())
	s := start(t, map[string]string{}, "-conf", corefile)
	c := new(dns.Client)
	m := new(dns.Msg)
	m.SetQuestion("foo.bar.com.", dns.TypeA)
	r, _, err := c.ExchangeContext(t.Context(), m, s.Addrs["dns"])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Rcode).To(Equal(dns.RcodeSuccess))
	g.Expect(r.Extra).To(ContainElement(BeAssignableToTypeOf(&dns.A{})))
	m.SetQuestion("example.org.", dns.TypeA)
	r, _, err = c.ExchangeContext(t.Context(), m, s.Addrs["dns"])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Rcode).To(Equal(dns.RcodeRefused))
}

func TestFromEnvModes(t *testing.T) {
	g := NewWithT(t)
	for env, want := range map[string]echobasic.Mode{"": echobasic.ModeHTTP, "GRPC_ECHO_SERVER": echobasic.ModeGRPC, "TCP_ECHO_SERVER": echobasic.ModeTCP, "UDP_ECHO_SERVER": echobasic.ModeUDP} {
		c, err := echobasic.FromEnv(func(k string) string {
			if k == env {
				return "1"
			}
			return ""
		}, nil)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(c.Mode).To(Equal(want), env)
		g.Expect(c.HTTPPort).To(Equal("3000"))
	}
	_, err := echobasic.FromEnv(func(string) string { return "" }, []string{"--bogus"})
	g.Expect(err).To(HaveOccurred())
}

func get(t *testing.T, url string, headers map[string]string) []byte {
	t.Helper()
	resp, err := nethttp.DefaultClient.Do(mustRequest(t, url, headers))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustRequest(t *testing.T, url string, headers map[string]string) *nethttp.Request {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	req, err := nethttp.NewRequestWithContext(ctx, nethttp.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	return req
}

// The suite finds a mirrored request by the log line echo-basic writes for
// each request it echoes (utils/http.GetMirrorLogRegexp).
func TestHTTPEchoLogsEachRequestAsTheSuiteSearches(t *testing.T) {
	var logged syncBuffer
	s := startLogging(t, map[string]string{}, log.New(&logged))
	resp, err := nethttp.Get("http://" + s.Addrs["http"] + "/mirror")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if re := chttp.GetMirrorLogRegexp("/mirror"); !re.MatchString(logged.String()) {
		t.Errorf("the log %q has no line the suite's %v finds", logged.String(), re)
	}
}

// syncBuffer is a bytes.Buffer safe for the server's and the test's
// goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
