package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tailplane/tailplane/internal/syncbuf"
	"github.com/tailplane/tailplane/internal/tailnettest"
	"github.com/tailplane/tailplane/internal/testpoll"
	"github.com/tailplane/tailplane/proxy/config"
)

// recordingDNS answers A queries for the names in hosts and NXDOMAIN for
// everything else, and remembers every name asked.
type recordingDNS struct {
	pc    net.PacketConn
	hosts map[string]net.IP
	mu    sync.Mutex
	asked []string
}

func newRecordingDNS(t *testing.T, hosts map[string]net.IP) *recordingDNS {
	t.Helper()
	// A loopback address of its own, so that parallel runs do not collide
	// on port 53.
	addr := net.JoinHostPort(fmt.Sprintf("127.53.%d.%d", rand.IntN(250)+1, rand.IntN(250)+1), "53")
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		t.Fatalf("DNS server on %s (needs root, like devcluster): %v", addr, err)
	}
	d := &recordingDNS{pc: pc, hosts: hosts}
	t.Cleanup(func() { pc.Close() })
	go d.serve()
	return d
}

func (d *recordingDNS) serve() {
	buf := make([]byte, 1500)
	for {
		n, from, err := d.pc.ReadFrom(buf)
		if err != nil {
			return
		}
		if resp := d.answer(buf[:n]); resp != nil {
			_, _ = d.pc.WriteTo(resp, from)
		}
	}
}

// answer builds the reply to one query (RFC 1035 4.1).
func (d *recordingDNS) answer(q []byte) []byte {
	if len(q) < 12 || binary.BigEndian.Uint16(q[4:6]) != 1 {
		return nil
	}
	var labels []string
	i := 12
	for i < len(q) && q[i] != 0 {
		l := int(q[i])
		if i+1+l > len(q) {
			return nil
		}
		labels = append(labels, string(q[i+1:i+1+l]))
		i += 1 + l
	}
	if i+5 > len(q) {
		return nil
	}
	qtype := binary.BigEndian.Uint16(q[i+1 : i+3])
	end := i + 5
	name := strings.ToLower(strings.Join(labels, ".")) + "."
	d.mu.Lock()
	d.asked = append(d.asked, name)
	d.mu.Unlock()
	resp := append([]byte(nil), q[:end]...)
	resp[2] = 0x80 | (q[2] & 0x01) // QR, keep RD
	resp[3] = 0x80                 // RA, NOERROR
	binary.BigEndian.PutUint16(resp[6:8], 0)
	binary.BigEndian.PutUint16(resp[8:10], 0)
	binary.BigEndian.PutUint16(resp[10:12], 0)
	ip, known := d.hosts[name]
	switch {
	case !known:
		resp[3] |= 3 // NXDOMAIN
	case qtype == 1: // A
		binary.BigEndian.PutUint16(resp[6:8], 1)
		resp = append(resp, 0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 5, 0, 4)
		resp = append(resp, ip.To4()...)
	}
	return resp
}

func (d *recordingDNS) names() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.asked...)
}

// On a tailnet without Internet access a proxy must contact only its login
// server, the DERP servers of its netmap and its targets. The real binary
// runs with a resolver that records every name it looks up; it must never
// ask for a Tailscale-operated host (log.tailscale.com for log uploads, or
// derp*.tailscale.com from the built-in DERP map), and it does resolve its
// own target through that resolver, which shows the recording works.
func TestBinaryContactsOnlyItsTailnet(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "tailplane-proxy")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	tn := tailnettest.New(t)
	backend, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { backend.Close() })
	go func() {
		for {
			c, err := backend.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 64)
				n, _ := c.Read(buf)
				_, _ = c.Write(append([]byte("pong:"), buf[:n]...))
			}()
		}
	}()
	dns := newRecordingDNS(t, map[string]net.IP{"backend.tailplane.test.": net.IPv4(127, 0, 0, 1)})
	dir := t.TempDir()
	resolv := filepath.Join(dir, "resolv.conf")
	nameserver, _, _ := net.SplitHostPort(dns.pc.LocalAddr().String())
	if err := os.WriteFile(resolv, []byte("nameserver "+nameserver+"\noptions timeout:1 attempts:1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(backend.Addr().(*net.TCPAddr).Port)
	cfg := &config.Config{Version: config.Version, Hostname: "offline-proxy", LoginServer: tn.ControlURL, Role: config.RoleIngressL4,
		L4: &config.L4{Ports: []config.PortMap{{Protocol: config.TCP, Port: 7000, Target: "backend.tailplane.test:" + port}}}}
	doc, _ := json.Marshal(cfg)
	cfgPath := filepath.Join(dir, "proxy-config.json")
	if err := os.WriteFile(cfgPath, doc, 0o600); err != nil {
		t.Fatal(err)
	}

	// The proxy sees our resolv.conf in a mount namespace of its own.
	var logs syncbuf.Buffer
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c",
		`mount --bind "$0" /etc/resolv.conf && exec "$1"`, resolv, bin)
	cmd.Env = append(os.Environ(), "TAILPLANE_CONFIG_FILE="+cfgPath, "TAILPLANE_STATE_DIR="+filepath.Join(dir, "state"),
		"TAILPLANE_LOCAL_ADDR=127.0.0.1:0")
	cmd.Stdout, cmd.Stderr = &logs, &logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Logf("proxy log:\n%s", logs.String())
	})

	client := tn.Node(t, "client")
	proxyIP := peerIP(t, client, "offline-proxy")
	testpoll.Until(t, 60*time.Second, "target reached by its name", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c, err := client.Dial(ctx, "tcp", net.JoinHostPort(proxyIP, "7000"))
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write([]byte("ping")); err != nil {
			return err
		}
		buf := make([]byte, 64)
		n, err := c.Read(buf)
		if got := string(buf[:n]); got != "pong:ping" {
			return fmt.Errorf("got %q, %v", got, err)
		}
		return nil
	})
	tailscaleHosts := func() []string {
		var out []string
		for _, n := range dns.names() {
			if strings.HasSuffix(n, ".tailscale.com.") || strings.HasSuffix(n, ".tailscale.io.") {
				out = append(out, n)
			}
		}
		return out
	}
	// tsnet starts uploading logs within seconds of starting; give it a few
	// more after the proxy serves.
	deadline := time.Now().Add(8 * time.Second)
	testpoll.Until(t, 10*time.Second, "the observation window", func() error {
		if hosts := tailscaleHosts(); len(hosts) > 0 {
			t.Fatalf("the proxy looked up Tailscale's public hosts %v (all lookups: %v)", hosts, dns.names())
		}
		if time.Now().Before(deadline) {
			return fmt.Errorf("still watching")
		}
		return nil
	})
	if !strings.Contains(strings.Join(dns.names(), " "), "backend.tailplane.test.") {
		t.Fatalf("the target was not resolved through the recording resolver: %v", dns.names())
	}
}

// The real binary with a live UDP flow exits promptly and cleanly on
// SIGTERM: a UDP flow has no end to wait for, so it ends with its listener
// instead of holding the drain until the pod is killed.
func TestBinarySIGTERMWithLiveUDPFlow(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "tailplane-proxy")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	tn := tailnettest.New(t)
	echo, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { echo.Close() })
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := echo.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = echo.WriteTo(append([]byte("echo:"), buf[:n]...), from)
		}
	}()
	dir := t.TempDir()
	cfg := &config.Config{Version: config.Version, Hostname: "udp-proxy", LoginServer: tn.ControlURL, Role: config.RoleIngressL4,
		L4: &config.L4{Ports: []config.PortMap{{Protocol: config.UDP, Port: 5353, Target: echo.LocalAddr().String()}}}}
	doc, _ := json.Marshal(cfg)
	// As in a pod: config and state in Secrets.
	ns := env.Namespace(t)
	if _, err := env.Clientset(t).CoreV1().Secrets(ns).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "udp-proxy-config"}, Data: map[string][]byte{config.SecretKey: doc}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const drain = 20 * time.Second
	var logs syncbuf.Buffer
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "TAILPLANE_CONFIG_SECRET=udp-proxy-config", "TS_KUBE_SECRET=udp-proxy-0", "POD_NAMESPACE="+ns,
		"KUBECONFIG="+filepath.Join(env.Dir(), "kubeconfig"), "TAILPLANE_STATE_DIR="+filepath.Join(dir, "state"),
		"TAILPLANE_LOCAL_ADDR=127.0.0.1:0", "TAILPLANE_DRAIN_TIMEOUT="+drain.String())
	exited := startProxy(t, cmd, &logs)

	client := tn.Node(t, "client")
	proxyIP := peerIP(t, client, "udp-proxy")
	c, err := client.Dial(context.Background(), "udp", net.JoinHostPort(proxyIP, "5353"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	roundTrip := func() error {
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Write([]byte("ping")); err != nil {
			return err
		}
		buf := make([]byte, 64)
		n, err := c.Read(buf)
		if got := string(buf[:n]); got != "echo:ping" {
			return fmt.Errorf("got %q, %v", got, err)
		}
		return nil
	}
	testpoll.Until(t, 60*time.Second, "live udp flow", roundTrip)
	// The client keeps its flow busy while the proxy shuts down.
	busy, stopBusy := context.WithCancel(context.Background())
	defer stopBusy()
	go func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for busy.Err() == nil {
			_ = roundTrip()
			<-tick.C
		}
	}()
	began := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("exit: %v", err)
		}
	case <-time.After(drain + 15*time.Second):
		t.Fatal("did not exit after SIGTERM")
	}
	if took := time.Since(began); took > drain/2 {
		t.Fatalf("exit with a live UDP flow took %s, want well under the %s drain bound", took.Round(time.Millisecond), drain)
	}
}
