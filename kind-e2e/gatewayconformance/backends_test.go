//go:build conformance

package gatewayconformance

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/miekg/dns"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	pb "sigs.k8s.io/gateway-api/conformance/echo-basic/grpcechoserver"
	"sigs.k8s.io/gateway-api/conformance/utils/config"
	cgrpc "sigs.k8s.io/gateway-api/conformance/utils/grpc"
	chttp "sigs.k8s.io/gateway-api/conformance/utils/http"
	"sigs.k8s.io/gateway-api/conformance/utils/roundtripper"
	"sigs.k8s.io/gateway-api/conformance/utils/suite"
	"sigs.k8s.io/gateway-api/conformance/utils/tcp"
)

// nodeName is devcluster's one node.
const nodeName = "devcluster"

// backendNamespaces are the namespaces of the base manifests' backends.
func backendNamespaces() []string {
	return []string{suite.InfrastructureNamespace, suite.AppBackendNamespace, suite.WebBackendNamespace}
}

// checkBackends proves the stand-in on the real node, independently of any
// Gateway: every pod of the base manifests runs there, and each answers on
// its pod IP (the host reaches the node's bridge) as the suite's own request
// helpers and parsers expect, with its pod name and namespace.
func checkBackends(ctx context.Context, t *testing.T, kube kubernetes.Interface, timeouts config.TimeoutConfig) {
	g := NewWithT(t)
	var pods []corev1.Pod
	g.Eventually(func(g Gomega) {
		pods = nil
		for _, ns := range backendNamespaces() {
			list, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(list.Items).NotTo(BeEmpty(), "no pods in %s", ns)
			for _, p := range list.Items {
				g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning), "%s/%s: %s", p.Namespace, p.Name, p.Status.Message)
				g.Expect(p.Status.ContainerStatuses).To(HaveEach(HaveField("Ready", BeTrue())), "%s/%s", p.Namespace, p.Name)
			}
			pods = append(pods, list.Items...)
		}
	}).WithContext(ctx).WithTimeout(5 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
	for _, p := range pods {
		t.Run(p.Namespace+"/"+p.Name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(p.Spec.NodeName).To(Equal(nodeName))
			g.Expect(p.Status.PodIP).NotTo(BeEmpty())
			checkBackend(ctx, t, p, timeouts)
		})
	}
}

// checkBackend asks one pod what its manifest makes it serve.
func checkBackend(ctx context.Context, t *testing.T, p corev1.Pod, timeouts config.TimeoutConfig) {
	g := NewWithT(t)
	c := p.Spec.Containers[0]
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	backend, addr := p.Labels["app"], net.JoinHostPort(p.Status.PodIP, "3000")
	switch {
	case slices.Contains(c.Args, "-conf"):
		m := new(dns.Msg)
		m.SetQuestion("foo.bar.com.", dns.TypeA)
		g.Eventually(func(g Gomega) {
			r, _, err := new(dns.Client).ExchangeContext(ctx, m, net.JoinHostPort(p.Status.PodIP, "53"))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(r.Rcode).To(Equal(dns.RcodeSuccess))
		}).WithTimeout(timeouts.MaxTimeToConsistency).Should(Succeed())
	case env["GRPC_ECHO_SERVER"] != "":
		client := &cgrpc.DefaultClient{}
		defer client.Close()
		cgrpc.MakeRequestAndExpectEventuallyConsistentResponse(t, client, timeouts, addr,
			cgrpc.ExpectedResponse{EchoRequest: &pb.EchoRequest{}, Backend: p.Name, Namespace: p.Namespace})
	case env["TCP_ECHO_SERVER"] != "":
		tcp.MakeTCPRequestAndExpectEventuallyValidResponse(t, timeouts, addr, nil, "", false,
			tcp.ExpectedResponse{Backend: backend, Namespace: p.Namespace})
	default:
		rt := &roundtripper.DefaultRoundTripper{TimeoutConfig: timeouts}
		chttp.MakeRequestAndExpectEventuallyConsistentResponse(t, rt, timeouts, addr, chttp.ExpectedResponse{
			Request: chttp.Request{Path: "/backend-check"}, Backend: p.Name, Namespace: p.Namespace,
		})
		if env["TLS_SERVER_CERT"] != "" {
			checkHTTPS(ctx, t, p)
		}
	}
	t.Logf("%s/%s answers as the suite expects (image %s)", p.Namespace, p.Name, c.Image)
}

// checkHTTPS asks a TLS backend on 8443: the answer carries the TLS facts.
// Its certificate is the suite's (for abc.example.com): not verified here,
// where only the stand-in is on trial.
func checkHTTPS(ctx context.Context, t *testing.T, p corev1.Pod) {
	g := NewWithT(t)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{ServerName: "abc.example.com", InsecureSkipVerify: true}, //nolint:gosec // see above
	}}
	g.Eventually(func(g Gomega) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+net.JoinHostPort(p.Status.PodIP, "8443")+"/tls-check", nil)
		g.Expect(err).NotTo(HaveOccurred())
		resp, err := client.Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		g.Expect(err).NotTo(HaveOccurred())
		var captured roundtripper.CapturedRequest
		g.Expect(json.Unmarshal(body, &captured)).To(Succeed(), string(body))
		g.Expect(captured.Pod).To(Equal(p.Name))
		g.Expect(captured.TLS.ServerName).To(Equal("abc.example.com"))
		g.Expect(captured.TLS.Version).NotTo(BeEmpty())
	}).WithTimeout(time.Minute).Should(Succeed())
}
