package bench

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// apiCounter is a plain-HTTP reverse proxy on loopback in front of the API
// server that counts the requests passing through it by verb and resource.
// The operator under test is pointed at it, so that every request it makes
// is counted whatever its build: the same counter measures an older
// release's binary, which has no metric of its own for this.
type apiCounter struct {
	srv *http.Server
	url string

	mu     sync.Mutex
	counts map[string]int // "VERB resource"
}

// newAPICounter starts the proxy with the admin credentials of cfg.
func newAPICounter(b *testing.B, cfg *rest.Config) *apiCounter {
	b.Helper()
	upstream, err := url.Parse(cfg.Host)
	if err != nil {
		b.Fatal(err)
	}
	transport, err := rest.TransportFor(cfg)
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	c := &apiCounter{url: "http://" + ln.Addr().String(), counts: map[string]int{}}
	rp := httputil.NewSingleHostReverseProxy(upstream)
	rp.Transport = transport
	rp.FlushInterval = -1 // watches stream
	c.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.counts[classify(r)]++
		c.mu.Unlock()
		rp.ServeHTTP(w, r)
	})}
	go func() { _ = c.srv.Serve(ln) }()
	b.Cleanup(func() { _ = c.srv.Close() })
	return c
}

// kubeconfig writes a kubeconfig that reaches the API server through the
// proxy, without credentials (the proxy adds them).
func (c *apiCounter) kubeconfig(b *testing.B) string {
	b.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["bench"] = &clientcmdapi.Cluster{Server: c.url}
	kc.AuthInfos["bench"] = &clientcmdapi.AuthInfo{}
	kc.Contexts["bench"] = &clientcmdapi.Context{Cluster: "bench", AuthInfo: "bench"}
	kc.CurrentContext = "bench"
	path := filepath.Join(b.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		b.Fatal(err)
	}
	return path
}

// snapshot returns the counts so far: the total, the writes (create,
// update, patch, delete) and one line per verb and resource, most first.
func (c *apiCounter) snapshot() (total, writes int, lines []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, n := range c.counts {
		total += n
		if verb, _, _ := strings.Cut(k, " "); verb != "GET" && verb != "LIST" && verb != "WATCH" {
			writes += n
		}
		lines = append(lines, fmt.Sprintf("%6d %s", n, k))
	}
	slices.Sort(lines)
	slices.Reverse(lines)
	return total, writes, lines
}

// classify names a request as the API server's audit log would: its verb
// (LIST and WATCH told apart from GET) and its resource (with subresource).
func classify(r *http.Request) string {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	// /api/v1/... or /apis/<group>/<version>/...
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return r.Method + " " + r.URL.Path // discovery, /version
	}
	if len(parts) >= 2 && parts[0] == "namespaces" && len(parts) != 2 {
		parts = parts[2:] // namespaced resource, not a namespace itself
	}
	resource, named := "", false
	if len(parts) > 0 {
		resource = parts[0]
		named = len(parts) > 1
		if len(parts) > 2 {
			resource += "/" + parts[2]
		}
	}
	verb := map[string]string{http.MethodPost: "CREATE", http.MethodPut: "UPDATE", http.MethodPatch: "PATCH", http.MethodDelete: "DELETE"}[r.Method]
	switch {
	case verb != "":
	case r.URL.Query().Get("watch") == "true" || r.URL.Query().Get("watch") == "1":
		verb = "WATCH"
	case named:
		verb = "GET"
	default:
		verb = "LIST"
	}
	return verb + " " + resource
}
