//go:build conformance

package gatewayconformance

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	pb "sigs.k8s.io/gateway-api/conformance/echo-basic/grpcechoserver"
	"sigs.k8s.io/gateway-api/conformance/utils/config"
	cgrpc "sigs.k8s.io/gateway-api/conformance/utils/grpc"
	chttp "sigs.k8s.io/gateway-api/conformance/utils/http"
	"sigs.k8s.io/gateway-api/conformance/utils/roundtripper"
	"sigs.k8s.io/gateway-api/conformance/utils/suite"
)

// pathCheck is one backend of the base manifests put on the tailnet by a
// tailscale LoadBalancer Service, which Tailplane serves today.
type pathCheck struct {
	name, app string
	port      int32
	grpc      bool
}

// checkTailnetPath proves the suite's own clients (the RoundTripper and
// the gRPC client the runner hands the suite, dialling through the tsnet
// node) reach the base backends over devcluster's tailnet, by the two kinds
// of address a Gateway's status will carry (its tailnet IP and its MagicDNS
// name), before any Gateway is served: each backend is exposed by a
// LoadBalancer Service of class tailscale, asked as the suite asks, and the
// Service is deleted again.
func checkTailnetPath(ctx context.Context, t *testing.T, kube kubernetes.Interface, rt roundtripper.RoundTripper, grpcClient cgrpc.Client, timeouts config.TimeoutConfig) {
	for _, pc := range []pathCheck{
		{name: "tailnet-path-http", app: "infra-backend-v1", port: 80},
		{name: "tailnet-path-grpc", app: "grpc-infra-backend-v1", port: 8080, grpc: true},
	} {
		t.Run(pc.name, func(t *testing.T) {
			for _, addr := range exposeOnTailnet(ctx, t, kube, pc) {
				addr = net.JoinHostPort(addr, strconv.Itoa(int(pc.port)))
				if pc.grpc {
					cgrpc.MakeRequestAndExpectEventuallyConsistentResponse(t, grpcClient, timeouts, addr, cgrpc.ExpectedResponse{
						EchoRequest: &pb.EchoRequest{}, Backend: pc.app, Namespace: suite.InfrastructureNamespace,
					})
					continue
				}
				chttp.MakeRequestAndExpectEventuallyConsistentResponse(t, rt, timeouts, addr, chttp.ExpectedResponse{
					Request: chttp.Request{Path: "/tailnet-path"}, Backend: pc.app, Namespace: suite.InfrastructureNamespace,
				})
			}
		})
	}
}

// exposeOnTailnet creates pc's LoadBalancer Service (deleted when the test
// ends) and returns its tailnet addresses once the operator published them:
// the IPs and the MagicDNS name of status.loadBalancer.ingress.
func exposeOnTailnet(ctx context.Context, t *testing.T, kube kubernetes.Interface, pc pathCheck) []string {
	t.Helper()
	g := NewWithT(t)
	svcs := kube.CoreV1().Services(suite.InfrastructureNamespace)
	class := "tailscale"
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: pc.name},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeLoadBalancer, LoadBalancerClass: &class,
			Selector: map[string]string{"app": pc.app},
			Ports:    []corev1.ServicePort{{Name: "echo", Port: pc.port, TargetPort: intstr.FromInt32(3000)}},
		},
	}
	_, err := svcs.Create(ctx, svc, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		// The test's context is done by now; the proxy and its device
		// go with the Service.
		cctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := svcs.Delete(cctx, pc.name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete Service %s: %v", pc.name, err)
			return
		}
		NewWithT(t).Eventually(func() error {
			_, err := svcs.Get(cctx, pc.name, metav1.GetOptions{})
			return err
		}).WithContext(cctx).WithTimeout(2*time.Minute).WithPolling(time.Second).Should(Satisfy(apierrors.IsNotFound), "Service %s not deleted", pc.name)
	})
	var addrs []string
	g.Eventually(func(g Gomega) {
		got, err := svcs.Get(ctx, pc.name, metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		addrs = nil
		for _, in := range got.Status.LoadBalancer.Ingress {
			if in.IP != "" {
				addrs = append(addrs, in.IP)
			}
			if in.Hostname != "" {
				addrs = append(addrs, in.Hostname)
			}
		}
		g.Expect(addrs).NotTo(BeEmpty(), "Service %s has no tailnet address yet: %+v", pc.name, got.Status)
	}).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
	t.Logf("Service %s/%s on the tailnet at %v", suite.InfrastructureNamespace, pc.name, addrs)
	return addrs
}
