package benchmark

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"tailscale.com/tsnet"

	"github.com/tailplane/tailplane/internal/tailnettest"
	"github.com/tailplane/tailplane/proxy/config"
)

const (
	bigBody     = 100 << 20
	smallBody   = "hello from the backend\n"
	concurrency = 8
)

// target is one proxy under test, seen from the client node.
type target struct {
	metrics map[string]float64 // last measurement, by unit
	name    string
	pid     int
	ip      string
	host    string // Host header the proxy serves
	scheme  string // "http" (port 80) or "https" (port 443)
	client  *http.Client
	dials   atomic.Int64 // connections the client opened
	// wantProto, when set, is the HTTP major version every response must
	// have (2: the benchmark measures HTTP/2, not a fallback).
	wantProto int
}

// BenchmarkProxy runs, side by side, tailplane-proxy (an L7 ingress with
// plain HTTP on :80) and tailscale serve (a tsnet node with an equivalent
// ServeConfig) as processes on one in-process tailnet, both in front of the
// same loopback backend, driven by the same client node:
// client node -> proxy node -> backend.
func BenchmarkProxy(b *testing.B) {
	pair := &sideBySide{targets: plainPair(b, "serve")}
	pair.run(b, "small", (*target).small, "req/s", "p99-ms")
	pair.run(b, "100MB", (*target).big, "MB/s")
}

// plainPair starts a tailnet, a loopback backend (startBackend),
// tailplane-proxy in front of it (an L7 ingress with plain HTTP on :80,
// configured from a file) and servenode as hostname bench-<name> with
// extra flags (none: tailscale serve in front of the same backend), and
// returns both as targets of one client node, tailplane first.
func plainPair(b *testing.B, name string, extra ...string) []*target {
	tn := tailnettest.New(b)
	backend := startBackend(b)
	proxyBin, serveBin := buildBinaries(b)
	client := tn.Node(b, "bench-client")
	dir := b.TempDir()
	tp := startTailplaneProxy(b, proxyBin, dir, tn.ControlURL, &config.L7{PlainHTTP: true, DefaultBackend: &config.Backend{Service: "bench", Address: backend}})
	hostname := "bench-" + name
	other := startProc(b, nil, serveBin, append([]string{"-control", tn.ControlURL, "-hostname", hostname,
		"-backend", "http://" + backend, "-dir", filepath.Join(dir, name)}, extra...)...)
	return []*target{
		newTarget(b, client, "tailplane", tp.Process.Pid, "bench-proxy", nil),
		newTarget(b, client, name, other.Process.Pid, hostname, nil),
	}
}

// startBackend serves the small body on /, the 100 MB one on /big and a
// WebSocket echo on /ws on loopback, and returns its address.
func startBackend(b *testing.B) string {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			w.Header().Set("Content-Length", strconv.Itoa(bigBody))
			chunk := make([]byte, 256<<10)
			for sent := 0; sent < bigBody; sent += len(chunk) {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
			return
		}
		if r.URL.Path == "/ws" {
			echoWebSocket(w, r)
			return
		}
		io.WriteString(w, smallBody)
	}))
	b.Cleanup(backend.Close)
	return backend.Listener.Addr().String()
}

// sideBySide measures two targets in each benchmark iteration, back to
// back, alternating which goes first, so that noise from the shared machine
// hits both alike.
type sideBySide struct {
	targets []*target
	round   int
}

// run is a sub-benchmark that measures each target and reports the first
// target's value over the second's for each of units.
func (s *sideBySide) run(b *testing.B, name string, measure func(*target, *testing.B), units ...string) {
	b.Run(name, func(b *testing.B) {
		s.round++
		for _, t := range ordered(s.targets, s.round) {
			measure(t, b)
		}
		for _, unit := range units {
			ratio(b, s.targets, unit)
		}
	})
}

// ordered returns targets in the given round's order.
func ordered(ts []*target, round int) []*target {
	if round%2 == 0 {
		return []*target{ts[1], ts[0]}
	}
	return ts
}

// newTarget reaches hostname's proxy from the client node: plain HTTP on
// port 80 when tlsConf is nil, otherwise HTTPS on 443 (HTTP/1.1 over TLS,
// as the bench/official load generator speaks, or HTTP/2 when tlsConf's
// NextProtos has h2).
func newTarget(b *testing.B, client *tsnet.Server, name string, pid int, hostname string, tlsConf *tls.Config) *target {
	ip := peerIP(b, client, hostname)
	t := &target{name: name, pid: pid, ip: ip.String(), host: tailnettest.FQDN(hostname), scheme: "http"}
	port := "80"
	if tlsConf != nil {
		t.scheme, port = "https", "443"
	}
	tr := &http.Transport{
		MaxIdleConnsPerHost: concurrency * 2,
		TLSClientConfig:     tlsConf,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			t.dials.Add(1)
			return client.Dial(ctx, "tcp", net.JoinHostPort(t.ip, port))
		},
	}
	if tlsConf != nil && slices.Contains(tlsConf.NextProtos, "h2") {
		// HTTP/2 only, and every response is checked to be HTTP/2.
		tr.Protocols = new(http.Protocols)
		tr.Protocols.SetHTTP2(true)
		t.wantProto = 2
	}
	t.client = &http.Client{Timeout: 60 * time.Second, Transport: tr}
	// Warm up: the first packets wait for DERP and the proxy's config.
	deadline := time.Now().Add(90 * time.Second)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for ; ; <-tick.C {
		if err := t.get("/", io.Discard); err == nil {
			break
		} else if time.Now().After(deadline) {
			b.Fatalf("%s never answered: %v", name, err)
		}
	}
	return t
}

func (t *target) get(path string, sink io.Writer) error {
	req, _ := http.NewRequest("GET", t.scheme+"://"+t.host+path, nil)
	resp, err := t.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(sink, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	if t.wantProto != 0 && resp.ProtoMajor != t.wantProto {
		return fmt.Errorf("%s answered over %s, not HTTP/%d", t.name, resp.Proto, t.wantProto)
	}
	return nil
}

// small sends b.N small requests from `concurrency` workers and reports
// requests/s, p50 and p99 latency, and the proxy process's RSS.
func (t *target) small(b *testing.B) {
	var next atomic.Int64
	lat := make([][]time.Duration, concurrency)
	var failed atomic.Int64
	var wg sync.WaitGroup
	dials := t.dials.Load()
	cpu0 := cpuSeconds(b, t.pid)
	start := time.Now()
	for w := range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				t0 := time.Now()
				if err := t.get("/", io.Discard); err != nil {
					failed.Add(1)
					continue
				}
				lat[w] = append(lat[w], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu := cpuSeconds(b, t.pid) - cpu0
	if failed.Load() > 0 {
		b.Fatalf("%s: %d of %d requests failed", t.name, failed.Load(), b.N)
	}
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	t.report(b, "req/s", float64(b.N)/elapsed.Seconds())
	t.report(b, "p50-ms", ms(all[len(all)/2]))
	t.report(b, "p99-ms", ms(all[len(all)*99/100]))
	// Connections opened per request: about 0 with keep-alive, 1 without.
	t.report(b, "conns/req", float64(t.dials.Load()-dials)/float64(b.N))
	// The proxy process's CPU time per request: what the proxy itself
	// costs, less sensitive to the shared machine than req/s.
	t.report(b, "cpu-us/req", cpu*1e6/float64(b.N))
	t.reportRSS(b)
}

// big downloads the 100 MB body b.N times and reports MB/s.
func (t *target) big(b *testing.B) {
	start := time.Now()
	for range b.N {
		if err := t.get("/big", io.Discard); err != nil {
			b.Fatalf("%s: %v", t.name, err)
		}
	}
	t.report(b, "MB/s", float64(b.N)*bigBody/1e6/time.Since(start).Seconds())
	t.reportRSS(b)
}

func (t *target) report(b *testing.B, unit string, v float64) {
	if t.metrics == nil {
		t.metrics = map[string]float64{}
	}
	t.metrics[unit] = v
	b.ReportMetric(v, t.name+"-"+unit)
}

func (t *target) reportRSS(b *testing.B) {
	cur, _, err := rssMB(t.pid)
	if err != nil {
		b.Fatalf("rss of %s: %v", t.name, err)
	}
	b.ReportMetric(cur, t.name+"-RSS-MiB")
}

// ratio reports tailplane's value over serve's for one unit.
func ratio(b *testing.B, ts []*target, unit string) {
	if s := ts[1].metrics[unit]; s != 0 {
		b.ReportMetric(ts[0].metrics[unit]/s, "ratio-"+unit)
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
