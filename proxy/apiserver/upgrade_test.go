package apiserver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tailplane/tailplane/internal/testpoll"
)

// kubectl exec over WebSocket goes through the proxy's upgrade path: the
// API server answers 101 Switching Protocols (it upgrades the client
// before it dials the kubelet), and the stream then carries the API
// server's frames back, here the error status of the exec, since testenv
// has no kubelet behind the node the pod is bound to.
func TestExecUpgrade(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	f := newFixture(t, ModeAuth)
	alice := f.tn.Node(t, "alice")
	f.grantGroups("tailnet-exec")
	grantRole(t, ns, "exec", rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "tailnet-exec"},
		[]string{"pods", "pods/exec"}, "get", "create")

	podOnNode(t, ns, "shell", 1) // nothing listens on port 1: no kubelet

	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(f.caPEM)
	hc := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return alice.Dial(ctx, "tcp", f.addr.String())
		},
		TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: f.domain},
	}}
	url := "wss://" + f.domain + "/api/v1/namespaces/" + ns + "/pods/shell/exec?container=sh&command=true&stdout=true"
	var c *websocket.Conn
	// The capability reaches the proxy's node shortly after it is set.
	testpoll.Until(t, 30*time.Second, "exec upgraded to WebSocket through the proxy", func() error {
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		conn, resp, err := websocket.Dial(dctx, url, &websocket.DialOptions{HTTPClient: hc, Subprotocols: []string{"v5.channel.k8s.io"}})
		if err != nil {
			code := 0
			if resp != nil {
				code = resp.StatusCode
			}
			return fmt.Errorf("%w (status %d)", err, code)
		}
		if resp.StatusCode != http.StatusSwitchingProtocols || conn.Subprotocol() != "v5.channel.k8s.io" {
			conn.CloseNow()
			return fmt.Errorf("status %d, subprotocol %q; want 101 with v5.channel.k8s.io", resp.StatusCode, conn.Subprotocol())
		}
		c = conn
		return nil
	})
	defer c.CloseNow()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// Frames flow back over the upgraded connection: channel 3 carries
	// the exec's status, a failure to reach the kubelet.
	for {
		_, msg, err := c.Read(wctx)
		if err != nil {
			t.Fatalf("reading the exec stream: %v", err)
		}
		if len(msg) == 0 || msg[0] != 3 {
			continue
		}
		var st metav1.Status
		if err := json.Unmarshal(msg[1:], &st); err != nil {
			t.Fatalf("status frame %q: %v", msg[1:], err)
		}
		if st.Status != metav1.StatusFailure || !strings.Contains(st.Message, "127.0.0.1") {
			t.Fatalf("exec status %+v, want the API server's failure to reach the kubelet", st)
		}
		return
	}
}

// podOnNode creates a pod bound to a node of its own whose kubelet is
// 127.0.0.1:kubeletPort (testenv runs no kubelet and no scheduler).
func podOnNode(t *testing.T, ns, name string, kubeletPort int) {
	t.Helper()
	ctx := context.Background()
	admin := env.Clientset(t)
	node, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.CoreV1().Nodes().Delete(context.Background(), node.Name, metav1.DeleteOptions{}) })
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}}
	node.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(kubeletPort)
	if _, err := admin.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// No controller manager creates the default ServiceAccount here.
	if _, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{NodeName: node.Name,
		Containers: []corev1.Container{{Name: "sh", Image: "busybox"}}}}
	if _, err := admin.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
