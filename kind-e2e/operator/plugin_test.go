package operator

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	tsapi "tailscale.com/client/tailscale/v2"
	"tailscale.com/ipn/store/mem"
	"tailscale.com/net/netns"
	"tailscale.com/tsnet"
)

// The canary of docs/plugins.md on devcluster: the canary example plugin,
// built from plugins/examples, sends "X-Canary: 1" to a second Service that
// the Ingress offers through tailplane.dev/extra-backends; then a
// fail-closed plugin that a proxy cannot load answers 503 at once.
var _ = Describe("routing plugins through an Ingress", Ordered, func() {
	var client *tailnetClient

	BeforeAll(func(ctx SpecContext) {
		module := buildPlugin(ctx, "./plugins/examples/canary")
		out, err := devcluster("kubectl", "create", "configmap", "canary-plugin", "--from-file=canary.wasm.gz="+module)
		Expect(err).NotTo(HaveOccurred(), out)
		out, err = devcluster("kubectl", "apply", "-f", "kind-e2e/operator/testdata/canary.yaml")
		Expect(err).NotTo(HaveOccurred(), out)
		client = newTailnetClient(ctx, "e2e-plugins")
		DeferCleanup(client.close)
	}, NodeTimeout(5*time.Minute))

	It("routes x-canary: 1 to the second Service", func(ctx SpecContext) {
		Eventually(func() (string, error) {
			return devcluster("kubectl", "get", "routingplugin", "canary", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].reason}`)
		}).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(2 * time.Second).Should(Equal("Loaded"))
		const site = "https://default-web-ingress.devcluster.ts.net/"
		Eventually(func() (string, error) {
			_, body, _, err := client.get(ctx, site, nil)
			return body, err
		}).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(2 * time.Second).Should(ContainSubstring(`"pod":"web-stable-`))
		for range 5 {
			status, body, _, err := client.get(ctx, site, http.Header{"X-Canary": {"1"}})
			Expect(err).NotTo(HaveOccurred())
			Expect(status).To(Equal(http.StatusOK), body)
			Expect(body).To(ContainSubstring(`"pod":"web-canary-`), "a request with X-Canary: 1")
			_, body, _, err = client.get(ctx, site, http.Header{"X-Canary": {"0"}})
			Expect(err).NotTo(HaveOccurred())
			Expect(body).To(ContainSubstring(`"pod":"web-stable-`), "a request without the canary value")
		}
	}, SpecTimeout(7*time.Minute))

	It("answers 503 at once when a fail-closed plugin cannot load", func(ctx SpecContext) {
		module := buildPlugin(ctx, "./plugins/examples/identity")
		out, err := devcluster("kubectl", "create", "configmap", "gate-plugin", "--from-file=identity.wasm.gz="+module)
		Expect(err).NotTo(HaveOccurred(), out)
		out, err = devcluster("kubectl", "apply", "-f", "kind-e2e/operator/testdata/gate.yaml")
		Expect(err).NotTo(HaveOccurred(), out)
		DeferCleanup(func() {
			_, _ = devcluster("kubectl", "delete", "--ignore-not-found", "-f", "kind-e2e/operator/testdata/gate-ingress.yaml", "-f", "kind-e2e/operator/testdata/gate.yaml")
			_, _ = devcluster("kubectl", "delete", "--ignore-not-found", "configmap", "gate-plugin")
		})
		Eventually(func() (string, error) {
			return devcluster("kubectl", "get", "routingplugin", "gate", "-o", `jsonpath={.status.conditions[?(@.type=="Accepted")].reason}`)
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Equal("Compiled"))
		// The operator accepted the module; spoil the copy its proxies read
		// (the pinned sha256 no longer matches; the copy is immutable, so
		// replace its first chunk), then create the Ingress.
		sum, err := devcluster("kubectl", "get", "routingplugin", "gate", "-o", "jsonpath={.status.sha256}")
		Expect(err).NotTo(HaveOccurred(), sum)
		chunk := "tp-wasm-" + sum + "-0"
		out, err = devcluster("kubectl", "delete", "secret", "-n", "tailscale", chunk)
		Expect(err).NotTo(HaveOccurred(), out)
		out, err = devcluster("kubectl", "create", "secret", "generic", "-n", "tailscale", chunk, "--from-literal=module.wasm.gz=not the accepted module")
		Expect(err).NotTo(HaveOccurred(), out)
		DeferCleanup(func() {
			_, _ = devcluster("kubectl", "delete", "--ignore-not-found", "secret", "-n", "tailscale", chunk)
		})
		out, err = devcluster("kubectl", "apply", "-f", "kind-e2e/operator/testdata/gate-ingress.yaml")
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(func() (string, error) {
			return devcluster("kubectl", "get", "routingplugin", "gate", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].reason} {.status.loadedBy[0].error}`)
		}).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(2 * time.Second).Should(And(HavePrefix("LoadFailed "), ContainSubstring("sha256 mismatch")))

		const gate = "https://default-gate-ingress.devcluster.ts.net/"
		// The first request also pays for the path to a new peer and the TLS
		// handshake; what the proxy adds is the time from the request written
		// to the first byte of its answer.
		var wrote, answered time.Time
		traced := httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
			WroteRequest:         func(httptrace.WroteRequestInfo) { wrote = time.Now() },
			GotFirstResponseByte: func() { answered = time.Now() },
		})
		status, body, took, err := client.get(traced, gate, nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(status).To(Equal(http.StatusServiceUnavailable), body)
		answer := answered.Sub(wrote)
		AddReportEntry("first request to an Ingress whose fail-closed plugin did not load", fmt.Sprintf("%s in all, %s from the request written to the answer", took, answer))
		Expect(answer).To(BeNumerically("<", time.Second), "the proxy took %s to answer the first request", answer)
		status, _, took, err = client.get(ctx, gate, nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(status).To(Equal(http.StatusServiceUnavailable))
		Expect(took).To(BeNumerically("<", time.Second), "the second request's 503 took %s", took)
	}, SpecTimeout(6*time.Minute))
})

// buildPlugin builds a Go guest of the repository as a c-shared wasip1
// module and returns the path of its gzip copy.
func buildPlugin(ctx context.Context, pkg string) string {
	dir := GinkgoT().TempDir()
	wasm := filepath.Join(dir, "plugin.wasm")
	cmd := exec.CommandContext(ctx, "go", "build", "-buildmode=c-shared", "-trimpath", "-o", wasm, pkg)
	cmd.Dir, cmd.Env = suite.root, append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	out, err := cmd.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "build %s: %s", pkg, out)
	b, err := os.ReadFile(wasm)
	Expect(err).NotTo(HaveOccurred())
	var gz bytes.Buffer
	w, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	_, _ = w.Write(b)
	Expect(w.Close()).To(Succeed())
	path := wasm + ".gz"
	Expect(os.WriteFile(path, gz.Bytes(), 0o644)).To(Succeed())
	return path
}

// tailnetClient is a tailnet node of the test itself, so requests can carry
// headers (devcluster curl sends none).
type tailnetClient struct {
	node *tsnet.Server
	http *http.Client
	log  *nodeLog
}

// nodeLog keeps the client node's log lines about its peers' WireGuard
// sessions and paths (disco, handshakes), with their times, so that a
// measurement can show what the client went through.
type nodeLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *nodeLog) logf(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	if !strings.Contains(line, "disco") && !strings.Contains(line, "andshake") && !strings.Contains(line, "wg:") {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.lines) < 5000 {
		l.lines = append(l.lines, time.Now().UTC().Format("15:04:05.000 ")+line)
	}
}

// since returns the lines logged at or after t.
func (l *nodeLog) since(t time.Time) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	from := t.UTC().Format("15:04:05.000")
	var out []string
	for _, line := range l.lines {
		if line[:12] >= from {
			out = append(out, line)
		}
	}
	return out
}

func newTailnetClient(ctx context.Context, hostname string) *tailnetClient {
	return newTailnetClientOf(ctx, hostname, "")
}

// newTailnetClientOf joins the tailnet whose tailnet.env variables start
// with prefix: "" for devcluster's tailnet, "SECOND_" for the second one
// (--tailnets 2).
func newTailnetClientOf(ctx context.Context, hostname, prefix string) *tailnetClient {
	vars := tailnetEnv()
	Expect(vars[prefix+"TS_CONTROL_URL"]).NotTo(BeEmpty(), "no %sTS_CONTROL_URL in tailnet.env", prefix)
	base, err := url.Parse(vars[prefix+"TS_API_URL"])
	Expect(err).NotTo(HaveOccurred())
	api := &tsapi.Client{BaseURL: base, Tailnet: "-", Auth: &tsapi.OAuth{ClientID: vars[prefix+"TS_API_CLIENT_ID"], ClientSecret: vars[prefix+"TS_API_CLIENT_SECRET"]}}
	var req tsapi.CreateKeyRequest
	req.Description, req.ExpirySeconds = "e2e "+hostname, 600
	req.Capabilities.Devices.Create.Ephemeral = true
	req.Capabilities.Devices.Create.Preauthorized = true
	key, err := api.Keys().CreateAuthKey(ctx, req)
	Expect(err).NotTo(HaveOccurred())
	pem, err := os.ReadFile(vars["TS_CA_FILE"])
	Expect(err).NotTo(HaveOccurred())
	roots := x509.NewCertPool()
	Expect(roots.AppendCertsFromPEM(pem)).To(BeTrue(), "no certificate in %s", vars["TS_CA_FILE"])
	netns.SetEnabled(false) // as devcluster curl: devcluster's tailnet is on loopback
	nl := &nodeLog{}
	node := &tsnet.Server{ControlURL: vars[prefix+"TS_CONTROL_URL"], Hostname: hostname, AuthKey: key.Key, Ephemeral: true,
		Store: new(mem.Store), Dir: GinkgoT().TempDir(), Logf: nl.logf, UserLogf: func(string, ...any) {}}
	_, err = node.Up(ctx)
	Expect(err).NotTo(HaveOccurred())
	return &tailnetClient{node: node, log: nl, http: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext: node.Dial, TLSClientConfig: &tls.Config{RootCAs: roots},
	}}}
}

// get returns the status, the body and how long the whole request took.
func (c *tailnetClient) get(ctx context.Context, target string, header http.Header) (int, string, time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return 0, "", 0, err
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	start := time.Now()
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, "", time.Since(start), err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	took := time.Since(start)
	if err != nil {
		return resp.StatusCode, "", took, fmt.Errorf("read %s: %w", target, err)
	}
	return resp.StatusCode, string(b), took, nil
}

func (c *tailnetClient) close() { _ = c.node.Close() }
