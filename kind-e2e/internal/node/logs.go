package node

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// logServer is the kubelet's containerLogs endpoint, enough for
// `kubectl logs` (with -f, --previous, --tail); the apiserver calls it with
// its kubelet client certificate.
type logServer struct {
	srv  *http.Server
	port int
}

func (l *logServer) close() { _ = l.srv.Close() }

func (n *Node) startLogServer(ctx context.Context) (*logServer, error) {
	serving, err := n.cfg.LocalCA.Issue(n.cfg.Dir, "node-serving", n.cfg.Name, false, []net.IP{net.ParseIP(NodeIP)}, []string{n.cfg.Name, "localhost"})
	if err != nil {
		return nil, err
	}
	cert, err := tls.LoadX509KeyPair(serving.CertFile, serving.KeyFile)
	if err != nil {
		return nil, err
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", NodeIP+":0")
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /containerLogs/{ns}/{pod}/{container}", n.serveLogs)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, TLSConfig: &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    n.cfg.LocalCA.Pool(),
	}}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	return &logServer{srv: srv, port: ln.Addr().(*net.TCPAddr).Port}, nil
}

func (n *Node) serveLogs(w http.ResponseWriter, r *http.Request) {
	ns, name, container := r.PathValue("ns"), r.PathValue("pod"), r.PathValue("container")
	var uid types.UID
	n.mu.Lock()
	for id, pw := range n.workers {
		if pw.pod.Namespace == ns && pw.pod.Name == name {
			uid = id
		}
	}
	pw := n.workers[uid]
	n.mu.Unlock()
	if pw == nil {
		http.Error(w, "pod "+ns+"/"+name+" is not running on this node", http.StatusNotFound)
		return
	}
	q := r.URL.Query()
	path := pw.logPath(container)
	if q.Get("previous") == "true" {
		path = pw.previousLogPath(container)
	}
	f, err := os.Open(path)
	if err != nil {
		http.Error(w, "no logs for container "+container+": "+err.Error(), http.StatusNotFound)
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", "text/plain")
	if tail, err := strconv.Atoi(q.Get("tailLines")); err == nil && tail >= 0 {
		b, _ := io.ReadAll(f)
		lines := strings.SplitAfter(string(b), "\n")
		if len(lines) > 0 && lines[len(lines)-1] == "" {
			lines = lines[:len(lines)-1]
		}
		if len(lines) > tail {
			lines = lines[len(lines)-tail:]
		}
		_, _ = io.WriteString(w, strings.Join(lines, ""))
	} else if _, err := io.Copy(w, f); err != nil {
		return
	}
	if q.Get("follow") != "true" {
		return
	}
	flusher, _ := w.(http.Flusher)
	buf := make([]byte, 32*1024)
	for {
		if flusher != nil {
			flusher.Flush()
		}
		nr, err := f.Read(buf)
		if nr > 0 {
			if _, werr := w.Write(buf[:nr]); werr != nil {
				return
			}
			continue
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}
