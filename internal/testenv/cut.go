package testenv

import (
	"io"
	"net"
	"net/url"
	"path/filepath"
	"sync"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Cut is a TCP relay in front of the control plane's API server that a test
// cuts the way an outage or a network partition does: while cut, open
// connections are dropped and new ones are accepted but never answered, so
// requests hang until their deadlines. Only the clients configured through
// it are affected; the test's own clients keep working.
type Cut struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	down   bool
	conns  map[net.Conn]bool
}

// CutOff starts a relay for this test and returns it with an admin
// rest.Config that goes through it.
func (e *Env) CutOff(t testing.TB) (*Cut, *rest.Config) {
	t.Helper()
	cfg := e.Config(t)
	u, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &Cut{ln: ln, target: u.Host, conns: map[net.Conn]bool{}}
	go c.serve()
	t.Cleanup(func() { ln.Close(); c.Start() })
	if cfg.TLSClientConfig.ServerName == "" {
		cfg.TLSClientConfig.ServerName = u.Hostname()
	}
	u.Host = ln.Addr().String()
	cfg.Host = u.String()
	return c, cfg
}

// Kubeconfig writes a copy of the control plane's kubeconfig that goes
// through the relay and returns its path.
func (c *Cut) Kubeconfig(t testing.TB, e *Env) string {
	t.Helper()
	kc, err := clientcmd.LoadFromFile(filepath.Join(e.Dir(), "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	for _, cl := range kc.Clusters {
		u, err := url.Parse(cl.Server)
		if err != nil {
			t.Fatal(err)
		}
		if cl.TLSServerName == "" {
			cl.TLSServerName = u.Hostname()
		}
		u.Host = c.ln.Addr().String()
		cl.Server = u.String()
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func (c *Cut) serve() {
	for {
		conn, err := c.ln.Accept()
		if err != nil {
			return
		}
		c.mu.Lock()
		c.conns[conn] = true
		down := c.down
		c.mu.Unlock()
		if !down {
			go c.relay(conn)
		} // else held open, unanswered, until End or the next Start
	}
}

func (c *Cut) relay(conn net.Conn) {
	up, err := net.Dial("tcp", c.target)
	if err != nil {
		conn.Close()
		return
	}
	c.mu.Lock()
	if c.down {
		c.mu.Unlock()
		up.Close()
		return
	}
	c.conns[up] = true
	c.mu.Unlock()
	go func() { _, _ = io.Copy(up, conn); up.Close() }()
	_, _ = io.Copy(conn, up)
	conn.Close()
}

// Start begins the outage.
func (c *Cut) Start() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.down = true
	c.dropLocked()
}

// End ends it; connections held meanwhile are closed so that clients dial
// again.
func (c *Cut) End() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.down = false
	c.dropLocked()
}

func (c *Cut) dropLocked() {
	for conn := range c.conns {
		conn.Close()
	}
	clear(c.conns)
}
