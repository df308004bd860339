package operator

import (
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// What only the real node shows (TAILPLANE_E2E_NODE=real): the operator and
// its proxies run as containers of the images deploy/images builds, from
// the chart's references, under the restricted Pod Security Standard.
var _ = Describe("the operator on the real node", Ordered, Label(realNodeOnly), func() {
	BeforeAll(func() {
		out, err := devcluster("kubectl", "apply", "-f", "kind-e2e/operator/testdata/echo.yaml", "-f", "examples/seed/01-service-expose.yaml")
		Expect(err).NotTo(HaveOccurred(), out)
	})

	It("runs the operator as a container of the chart's image, imported without a registry", func() {
		Expect(devcluster("kubectl", "get", "node", "devcluster", "-o", "jsonpath={.status.nodeInfo.containerRuntimeVersion}")).To(HavePrefix("containerd://"))
		out, err := devcluster("kubectl", "-n", "tailscale", "get", "deployment", "operator", "-o",
			"jsonpath={.spec.template.spec.containers[0].image} {.spec.template.spec.containers[0].imagePullPolicy}")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(Equal("ghcr.io/tailplane/tailplane-operator:latest IfNotPresent"))
		out, err = devcluster("kubectl", "-n", "tailscale", "get", "pods", "-l", "app.kubernetes.io/name=tailplane-operator", "-o",
			"jsonpath={.items[0].status.containerStatuses[0].image} {.items[0].status.containerStatuses[0].imageID} {.items[0].status.containerStatuses[0].ready}")
		Expect(err).NotTo(HaveOccurred(), out)
		// An imported image has no registry digest: its ID is its config's.
		Expect(out).To(MatchRegexp(`^ghcr\.io/tailplane/tailplane-operator:latest sha256:[0-9a-f]{64} true$`))
	})

	It("runs the proxies from the chart's proxy image under the restricted Pod Security Standard", func() {
		for _, ns := range []string{"tailscale", "default"} {
			Expect(devcluster("kubectl", "get", "namespace", ns, "-o", `jsonpath={.metadata.labels.pod-security\.kubernetes\.io/enforce}`)).To(Equal("restricted"), "namespace %s", ns)
		}
		selector := "tailscale.com/parent-resource=postgres,tailscale.com/parent-resource-ns=default"
		Eventually(func() (string, error) {
			return devcluster("kubectl", "-n", "tailscale", "get", "pods", "-l", selector, "-o",
				"jsonpath={.items[0].status.containerStatuses[0].image} {.items[0].status.containerStatuses[0].imageID} {.items[0].status.containerStatuses[0].ready}")
		}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(MatchRegexp(`^ghcr\.io/tailplane/tailplane-proxy:latest sha256:[0-9a-f]{64} true$`))
		Expect(devcluster("kubectl", "-n", "tailscale", "get", "pods", "-l", selector, "-o",
			"jsonpath={.items[0].spec.securityContext.runAsNonRoot} {.items[0].spec.securityContext.seccompProfile.type} "+
				"{.items[0].spec.containers[0].securityContext.readOnlyRootFilesystem} {.items[0].spec.containers[0].securityContext.capabilities.drop}")).
			To(Equal(`true RuntimeDefault true ["ALL"]`))

		By("a pod that breaks the standard is refused in the operator's namespace")
		out, err := devcluster("kubectl", "-n", "tailscale", "run", "privileged", "--image", "ghcr.io/tailplane/echo:dev", "--dry-run=server")
		Expect(err).To(HaveOccurred(), out)
		Expect(out).To(ContainSubstring(`violates PodSecurity "restricted:latest"`))
	})

	It("resolves a tailnet name from a pod through CoreDNS and the DNSConfig nameserver", func(ctx SpecContext) {
		out, err := devcluster("kubectl", "apply", "-f", "examples/seed/03-ingress.yaml", "-f", "kind-e2e/operator/testdata/dnsconfig.yaml")
		Expect(err).NotTo(HaveOccurred(), out)
		By("the nameserver's Service, named in a CoreDNS stub domain for ts.net as the official docs describe")
		var nsIP string
		Eventually(func(g Gomega) {
			out, err := devcluster("kubectl", "get", "dnsconfig", "ts-dns", "-o", "jsonpath={.status.nameserver.ip}")
			g.Expect(err).NotTo(HaveOccurred(), out)
			g.Expect(out).NotTo(BeEmpty())
			nsIP = out
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
		// devcluster's Corefile imports the server blocks of ConfigMap
		// coredns-custom, as k3s's does.
		stub := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: coredns-custom, namespace: kube-system}\ndata:\n  ts.net.server: |\n" +
			indent("ts.net:53 {\n    errors\n    cache 30\n    forward . "+nsIP+"\n}\n", "    ")
		out, err = devclusterStdin(stub, "kubectl", "apply", "-f", "-")
		Expect(err).NotTo(HaveOccurred(), out)
		// CoreDNS's reload plugin would pick the change up once the kubelet
		// refreshes the volume (up to a minute); a new pod reads it at once.
		out, err = devcluster("kubectl", "-n", "kube-system", "rollout", "restart", "deployment", "coredns")
		Expect(err).NotTo(HaveOccurred(), out)

		By("a pod that is not on the tailnet resolves the Ingress's MagicDNS name to the Ingress proxy")
		root, err := os.ReadFile(filepath.Join(suite.dir, "cluster", "ca.pem"))
		Expect(err).NotTo(HaveOccurred())
		out, err = devclusterStdin(clientPod(string(root)), "kubectl", "apply", "-f", "-")
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(func() (string, error) {
			return devcluster("kubectl", "get", "pod", "dns-client", "-o", "jsonpath={.status.phase}")
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(Equal("Running"))
		var ingressIP string
		Eventually(func() (string, error) {
			out, err := devcluster("kubectl", "-n", "tailscale", "get", "pods", "-l", "tailscale.com/parent-resource=my-app,tailscale.com/parent-resource-ns=default",
				"-o", "jsonpath={.items[0].status.podIP}")
			ingressIP = out
			return out, err
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(time.Second).ShouldNot(BeEmpty())
		Eventually(func() (string, error) {
			return devcluster("kubectl", "exec", "dns-client", "--", "devcluster-echo", "lookup", "my-app.devcluster.ts.net")
		}).WithContext(ctx).WithTimeout(3*time.Minute).WithPolling(2*time.Second).Should(Equal(ingressIP+"\n"), "the Ingress proxy's pod IP")

		By("an egress Service's tailnet name resolves to its proxy, which forwards to the tailnet device")
		// The Ingress proxy serves tailnet clients only: its pod IP takes
		// no connection (docs/e2e.md). An egress proxy's pod IP is where
		// cluster workloads connect.
		out, err = devclusterStdin(`apiVersion: v1
kind: Service
metadata:
  name: postgres-egress
  annotations: {tailscale.com/tailnet-fqdn: default-postgres.devcluster.ts.net}
spec:
  type: ExternalName
  externalName: placeholder
  ports: [{name: pg, port: 5432, protocol: TCP}]
`, "kubectl", "apply", "-f", "-")
		Expect(err).NotTo(HaveOccurred(), out)
		var egressIP string
		Eventually(func() (string, error) {
			out, err := devcluster("kubectl", "-n", "tailscale", "get", "pods", "-l", "tailscale.com/parent-resource=postgres-egress,tailscale.com/parent-resource-ns=default",
				"-o", `jsonpath={.items[?(@.status.containerStatuses[0].ready==true)].status.podIP}`)
			egressIP = out
			return out, err
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(time.Second).ShouldNot(BeEmpty())
		Eventually(func() (string, error) {
			return devcluster("kubectl", "exec", "dns-client", "--", "devcluster-echo", "lookup", "default-postgres.devcluster.ts.net")
		}).WithContext(ctx).WithTimeout(3*time.Minute).WithPolling(2*time.Second).Should(Equal(egressIP+"\n"), "the egress proxy's pod IP")
		Eventually(func() (string, error) {
			return devcluster("kubectl", "exec", "dns-client", "--", "devcluster-echo", "get", "http://default-postgres.devcluster.ts.net:5432/")
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(2 * time.Second).Should(ContainSubstring(`"pod":"postgres-`))
	}, SpecTimeout(9*time.Minute))
})

// clientPod is an echo pod (restricted) with Pebble's root in SSL_CERT_FILE:
// a cluster workload that is not on the tailnet.
func clientPod(rootPEM string) string {
	return `apiVersion: v1
kind: ConfigMap
metadata: {name: pebble-root}
data:
  ca.pem: |
` + indent(rootPEM, "    ") + `---
apiVersion: v1
kind: Pod
metadata: {name: dns-client}
spec:
  containers:
    - name: echo
      image: ghcr.io/tailplane/echo:dev
      imagePullPolicy: IfNotPresent
      env:
        - {name: SSL_CERT_FILE, value: /pebble/ca.pem}
        - {name: PORT, value: "8080"}
        - name: POD_IP
          valueFrom: {fieldRef: {fieldPath: status.podIP}}
      volumeMounts: [{name: root, mountPath: /pebble, readOnly: true}]
      securityContext:
        runAsNonRoot: true
        allowPrivilegeEscalation: false
        readOnlyRootFilesystem: true
        capabilities: {drop: [ALL]}
        seccompProfile: {type: RuntimeDefault}
  volumes: [{name: root, configMap: {name: pebble-root}}]
`
}

// indent prefixes every line of s.
func indent(s, prefix string) string {
	var b strings.Builder
	for line := range strings.Lines(s) {
		b.WriteString(prefix + line)
	}
	if !strings.HasSuffix(s, "\n") {
		b.WriteString("\n")
	}
	return b.String()
}
