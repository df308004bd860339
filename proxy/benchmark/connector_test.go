package benchmark

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"tailscale.com/ipn"
	"tailscale.com/net/tsaddr"
	"tailscale.com/tailcfg"
	"tailscale.com/tsnet"
	"tailscale.com/wgengine/netstack"

	"github.com/tailplane/tailplane/internal/tailnettest"
	"github.com/tailplane/tailplane/proxy/config"
)

// connBody is what tcpnode's source port sends per connection (its
// default -size).
const connBody = 100 << 20

// path is one way from a client node to a tcpnode's source and echo ports.
type path struct {
	name    string
	client  *tsnet.Server
	source  netip.AddrPort
	echo    netip.AddrPort
	metrics map[string]float64
}

// BenchmarkConnector compares, in one run on one in-process tailnet, TCP
// through tailplane-proxy in the connector role with direct tailnet TCP:
//
//   - direct: client node -> tcpnode's own tsnet node (tailnet listener);
//   - subnet: client node -> tailplane-proxy (connector, route <host IP>/32,
//     approved in control) -> tcpnode on the host address;
//   - exit: a second client node using tailplane-proxy (connector,
//     exitNode) as its exit node -> tcpnode on the host address.
//
// Every process is separate: the two proxies, the tailnet tcpnode, the host
// tcpnode; the client nodes live in the benchmark process. "100MB" reads a
// 100 MB stream b.N times and reports MB/s; "request" opens b.N
// connections, each sending 64 bytes and reading them back, and reports
// p50/p99 latency (connection setup included). Ratios are against direct.
func BenchmarkConnector(b *testing.B) {
	tn := tailnettest.New(b)
	host := hostIPv4(b)
	proxyBin, tcpBin := buildBinary(b, "../../cmd/tailplane-proxy"), buildBinary(b, "./tcpnode")
	dir := b.TempDir()
	startProc(b, nil, tcpBin, "-host", host.String(), "-source-port", "9100", "-echo-port", "9101")
	startProc(b, nil, tcpBin, "-control", tn.ControlURL, "-hostname", "bench-direct", "-dir", filepath.Join(dir, "direct"))
	startConnector(b, tn, proxyBin, "bench-subnet", &config.Connector{Routes: []string{netip.PrefixFrom(host, 32).String()}})
	startConnector(b, tn, proxyBin, "bench-exit", &config.Connector{ExitNode: true})

	client := tn.Node(b, "bench-client")
	editPrefs(b, client, &ipn.MaskedPrefs{Prefs: ipn.Prefs{RouteAll: true}, RouteAllSet: true})
	exitClient := tn.Node(b, "bench-exit-client")
	approveRoutes(b, tn, "bench-subnet", netip.PrefixFrom(host, 32))
	exitNode := approveRoutes(b, tn, "bench-exit", tsaddr.ExitRoutes()...)
	editPrefs(b, exitClient, &ipn.MaskedPrefs{Prefs: ipn.Prefs{ExitNodeID: exitNode}, ExitNodeIDSet: true})

	direct := peerIP(b, client, "bench-direct")
	paths := []*path{
		{name: "direct", client: client, source: netip.AddrPortFrom(direct, 9000), echo: netip.AddrPortFrom(direct, 9001)},
		{name: "subnet", client: client, source: netip.AddrPortFrom(host, 9100), echo: netip.AddrPortFrom(host, 9101)},
		{name: "exit", client: exitClient, source: netip.AddrPortFrom(host, 9100), echo: netip.AddrPortFrom(host, 9101)},
	}
	for _, p := range paths {
		p.warmUp(b)
	}
	var round int
	b.Run("100MB", func(b *testing.B) {
		round++
		for _, p := range rotate(paths, round) {
			p.download(b)
		}
		ratios(b, paths, "MB/s")
	})
	b.Run("request", func(b *testing.B) {
		round++
		for _, p := range rotate(paths, round) {
			p.requests(b)
		}
		ratios(b, paths, "p50-ms")
		ratios(b, paths, "p99-ms")
	})
}

// rotate returns ps starting at a different path each round, so that noise
// from the shared machine hits every path alike.
func rotate(ps []*path, round int) []*path {
	i := round % len(ps)
	return append(append([]*path{}, ps[i:]...), ps[:i]...)
}

// dial connects over the tailnet only (the client's userspace stack): an
// address no peer routes fails instead of reaching the host directly.
func (p *path) dial(ctx context.Context, addr netip.AddrPort) (net.Conn, error) {
	ns, ok := p.client.Sys().Netstack.Get().(*netstack.Impl)
	if !ok {
		return nil, fmt.Errorf("no netstack")
	}
	src, _ := p.client.TailscaleIPs()
	return ns.DialContextTCPWithBind(ctx, src, addr)
}

func (p *path) echoOnce() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := p.dial(ctx, p.echo)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	msg := make([]byte, 64)
	if _, err := c.Write(msg); err != nil {
		return err
	}
	_, err = io.ReadFull(c, msg)
	return err
}

// warmUp waits until the path answers: routes reach the clients, DERP and
// the first handshakes happen here, not in a measurement.
func (p *path) warmUp(b *testing.B) {
	deadline := time.Now().Add(90 * time.Second)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for ; ; <-tick.C {
		err := p.echoOnce()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s never answered: %v", p.name, err)
		}
	}
}

func (p *path) download(b *testing.B) {
	start := time.Now()
	for range b.N {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		c, err := p.dial(ctx, p.source)
		if err != nil {
			cancel()
			b.Fatalf("%s: %v", p.name, err)
		}
		n, err := io.Copy(io.Discard, c)
		c.Close()
		cancel()
		if err != nil || n != connBody {
			b.Fatalf("%s: read %d bytes of %d: %v", p.name, n, connBody, err)
		}
	}
	p.report(b, "MB/s", float64(b.N)*connBody/1e6/time.Since(start).Seconds())
}

func (p *path) requests(b *testing.B) {
	lat := make([]time.Duration, 0, b.N)
	for range b.N {
		t0 := time.Now()
		if err := p.echoOnce(); err != nil {
			b.Fatalf("%s: %v", p.name, err)
		}
		lat = append(lat, time.Since(t0))
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	p.report(b, "p50-ms", ms(lat[len(lat)/2]))
	p.report(b, "p99-ms", ms(lat[len(lat)*99/100]))
}

func (p *path) report(b *testing.B, unit string, v float64) {
	if p.metrics == nil {
		p.metrics = map[string]float64{}
	}
	p.metrics[unit] = v
	b.ReportMetric(v, p.name+"-"+unit)
}

// ratios reports each forwarded path's value over direct's.
func ratios(b *testing.B, ps []*path, unit string) {
	d := ps[0].metrics[unit]
	if d == 0 {
		return
	}
	for _, p := range ps[1:] {
		b.ReportMetric(p.metrics[unit]/d, "ratio-"+p.name+"-"+unit)
	}
}

// startConnector runs tailplane-proxy in the connector role.
func startConnector(b *testing.B, tn *tailnettest.Tailnet, bin, hostname string, c *config.Connector) {
	b.Helper()
	dir := filepath.Join(b.TempDir(), hostname)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		b.Fatal(err)
	}
	cfg := &config.Config{Version: config.Version, Hostname: hostname, LoginServer: tn.ControlURL, Role: config.RoleConnector, Connector: c}
	doc, _ := json.Marshal(cfg)
	cfgPath := filepath.Join(dir, "proxy-config.json")
	if err := os.WriteFile(cfgPath, doc, 0o600); err != nil {
		b.Fatal(err)
	}
	startProc(b, []string{"TAILPLANE_CONFIG_FILE=" + cfgPath, "TAILPLANE_STATE_DIR=" + filepath.Join(dir, "state"),
		"TAILPLANE_LOCAL_ADDR=127.0.0.1:0", "TAILPLANE_LOG_LEVEL=warn"}, bin)
}

// approveRoutes waits until the node named hostname advertises want, then
// approves them in control, and returns the node's stable ID.
func approveRoutes(b *testing.B, tn *tailnettest.Tailnet, hostname string, want ...netip.Prefix) tailcfg.StableNodeID {
	b.Helper()
	deadline := time.Now().Add(90 * time.Second)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for ; time.Now().Before(deadline); <-tick.C {
		for _, n := range tn.Control.AllNodes() {
			if n.Hostinfo.Valid() && n.Hostinfo.Hostname() == hostname && n.Hostinfo.RoutableIPs().Len() == len(want) {
				tn.Control.SetSubnetRoutes(n.Key, n.Hostinfo.RoutableIPs().AsSlice())
				return n.StableID
			}
		}
	}
	b.Fatalf("%s never advertised %v", hostname, want)
	return ""
}

func editPrefs(b *testing.B, node *tsnet.Server, mp *ipn.MaskedPrefs) {
	b.Helper()
	lc, err := node.LocalClient()
	if err != nil {
		b.Fatal(err)
	}
	if _, err := lc.EditPrefs(context.Background(), mp); err != nil {
		b.Fatal(err)
	}
}

// hostIPv4 is a non-loopback IPv4 address of this machine: the connectors
// route to it (the userspace stack drops tailnet packets to loopback).
func hostIPv4(b *testing.B) netip.Addr {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		b.Fatal(err)
	}
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().Is4() && p.Addr().IsGlobalUnicast() && !tsaddr.IsTailscaleIP(p.Addr()) {
			return p.Addr()
		}
	}
	b.Fatalf("no non-loopback IPv4 address on this machine: %v", addrs)
	return netip.Addr{}
}

// buildBinary builds the command in pkg once per run.
func buildBinary(b *testing.B, pkg string) string {
	b.Helper()
	bin := filepath.Join(b.TempDir(), filepath.Base(pkg))
	if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
		b.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	return bin
}
