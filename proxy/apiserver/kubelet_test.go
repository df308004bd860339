package apiserver

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/rest"

	"github.com/tailplane/tailplane/internal/testpoll"
)

// An exec request upgraded to SPDY (what kubectl falls back to, and what
// port-forward and attach use alike) goes end to end through the proxy:
// client -> proxy (tailnet, auth mode) -> API server -> a kubelet
// stand-in. The API server upgrades the client only once the kubelet did,
// and then both it and the proxy pipe bytes: the stand-in echoes what the
// client writes after the 101, upper-cased, which proves both directions
// of the upgraded connection. (The bytes are not SPDY frames: neither the
// proxy nor the API server reads them.)
func TestExecSPDYUpgrade(t *testing.T) {
	ns := env.Namespace(t)
	kubelet := fakeKubelet(t)
	port, _ := strconv.Atoi(kubelet.URL[strings.LastIndex(kubelet.URL, ":")+1:])
	f := newFixture(t, ModeAuth)
	alice := f.tn.Node(t, "alice")
	f.grantGroups("tailnet-exec")
	grantRole(t, ns, "exec", rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "tailnet-exec"},
		[]string{"pods", "pods/exec"}, "get", "create")
	podOnNode(t, ns, "shell", port)

	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(f.caPEM)
	path := "/api/v1/namespaces/" + ns + "/pods/shell/exec?container=sh&command=cat&stdin=true&stdout=true"
	// The grant reaches the proxy's node shortly after it is set.
	testpoll.Until(t, 30*time.Second, "exec upgraded to SPDY through the proxy, echoing", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		raw, err := alice.Dial(ctx, "tcp", f.addr.String())
		if err != nil {
			return err
		}
		conn := tls.Client(raw, &tls.Config{RootCAs: roots, ServerName: f.domain})
		defer conn.Close()
		if d, ok := ctx.Deadline(); ok {
			_ = conn.SetDeadline(d)
		}
		req, _ := http.NewRequest("POST", "https://"+f.domain+path, nil)
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", "SPDY/3.1")
		req.Header.Set("X-Stream-Protocol-Version", "v4.channel.k8s.io")
		if err := req.Write(conn); err != nil {
			return err
		}
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, req)
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusSwitchingProtocols {
			b, _ := io.ReadAll(resp.Body)
			return fmt.Errorf("status %d: %s", resp.StatusCode, b)
		}
		if got := resp.Header.Get("X-Stream-Protocol-Version"); got != "v4.channel.k8s.io" {
			return fmt.Errorf("101 without the kubelet's protocol choice (%q)", got)
		}
		if _, err := conn.Write([]byte("hello from kubectl\n")); err != nil {
			return err
		}
		line, err := br.ReadString('\n')
		if err != nil {
			return fmt.Errorf("reading the upgraded stream: %w", err)
		}
		if line != "HELLO FROM KUBECTL\n" {
			return fmt.Errorf("echo %q", line)
		}
		return nil
	})
}

// kubectl logs -f streams through the proxy: a line the container wrote
// reaches the client while the log stream is still open.
func TestLogsFollow(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	more := make(chan struct{})
	kubelet := fakeKubeletWithLogs(t, more)
	port, _ := strconv.Atoi(kubelet.URL[strings.LastIndex(kubelet.URL, ":")+1:])
	f := newFixture(t, ModeAuth)
	alice := f.tn.Node(t, "alice")
	f.grantGroups("tailnet-logs")
	grantRole(t, ns, "logs", rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "tailnet-logs"},
		[]string{"pods", "pods/log"}, "get")
	podOnNode(t, ns, "app", port)
	kube := f.client(t, alice, "", rest.ImpersonationConfig{})

	var stream io.ReadCloser
	testpoll.Until(t, 30*time.Second, "logs -f through the proxy", func() (err error) {
		stream, err = kube.CoreV1().Pods(ns).GetLogs("app", &corev1.PodLogOptions{Container: "sh", Follow: true}).Stream(ctx)
		return err
	})
	defer stream.Close()
	br := bufio.NewReader(stream)
	if line, err := br.ReadString('\n'); err != nil || line != "first line\n" {
		t.Fatalf("first line %q, %v; want it while the stream is open", line, err)
	}
	close(more)
	if line, err := br.ReadString('\n'); err != nil || line != "second line\n" {
		t.Fatalf("second line %q, %v", line, err)
	}
}

// fakeKubelet answers upgrade requests as a kubelet does for exec (101,
// SPDY/3.1, the chosen stream protocol) and then echoes each line it
// reads, upper-cased. Its serving certificate is signed by the CA the API
// server trusts for kubelets (devcluster's local CA).
func fakeKubelet(t *testing.T) *httptest.Server {
	return fakeKubeletWithLogs(t, nil)
}

// fakeKubeletWithLogs also answers container log requests: it writes and
// flushes the first line, then the second once more is closed.
func fakeKubeletWithLogs(t *testing.T, more chan struct{}) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/containerLogs/") && more != nil {
			_, _ = io.WriteString(w, "first line\n")
			_ = http.NewResponseController(w).Flush()
			select {
			case <-more:
			case <-r.Context().Done():
				return
			}
			_, _ = io.WriteString(w, "second line\n")
			return
		}
		if !strings.HasPrefix(r.URL.Path, "/exec/") || r.Header.Get("Upgrade") != "SPDY/3.1" {
			http.Error(w, "not an exec upgrade", http.StatusBadRequest)
			return
		}
		conn, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		_, _ = rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n" +
			"X-Stream-Protocol-Version: v4.channel.k8s.io\r\n\r\n")
		_ = rw.Flush()
		_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
		for {
			line, err := rw.ReadString('\n')
			if err != nil {
				return
			}
			_, _ = rw.WriteString(strings.ToUpper(line))
			if rw.Flush() != nil {
				return
			}
		}
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{kubeletCert(t)}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// kubeletCert is a serving certificate for 127.0.0.1 signed by the local
// CA of testenv's control plane.
func kubeletCert(t *testing.T) tls.Certificate {
	t.Helper()
	dir := filepath.Join(env.Dir(), "pki")
	certPEM, err := os.ReadFile(filepath.Join(dir, "local-ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, "local-ca.key"))
	if err != nil {
		t.Fatal(err)
	}
	ca, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(ca.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := selfSigned(t, "kubelet") // for its key only
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "kubelet"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, leaf.Leaf.PublicKey, ca.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: leaf.PrivateKey}
}
