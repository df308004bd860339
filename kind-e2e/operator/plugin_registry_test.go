package operator

import (
	"context"
	"net/http"
	"path/filepath"
	"regexp"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/tailplane/tailplane/kind-e2e/internal/gotask"
	"github.com/tailplane/tailplane/kind-e2e/internal/registry"
)

// docs/plugins.md's author workflow on devcluster: build the canary example
// with `go tool task plugin:build`, push it to devcluster's OCI registry
// with `plugin:push` (no Docker), and a RoutingPlugin pulling it by
// reference and sha256 routes requests of the Ingress web.
//
// Process node only: the registry listens on 127.0.0.1, which a pod's
// network namespace on the real node cannot reach, and go-containerregistry
// speaks plain HTTP only to loopback and RFC 1918 addresses (docs/e2e.md).
var _ = Describe("a routing plugin pushed to devcluster's OCI registry", Ordered, Label(processNodeOnly), func() {
	var client *tailnetClient

	BeforeAll(func(ctx SpecContext) {
		skipIfExternal("the operator pulls from devcluster's OCI registry on loopback")
		out, err := devcluster("kubectl", "apply", "-f", "kind-e2e/operator/testdata/canary.yaml")
		Expect(err).NotTo(HaveOccurred(), out)
		client = newTailnetClient(ctx, "e2e-plugin-registry")
		DeferCleanup(client.close)
	}, NodeTimeout(5*time.Minute))

	It("is built, pushed, pulled by the operator and routes through the Ingress", func(ctx SpecContext) {
		reg := registry.Address(suite.clusterDir())
		Expect(reg).NotTo(BeEmpty(), "devcluster up wrote no registry.env")
		wasm := filepath.Join(GinkgoT().TempDir(), "canary.wasm")
		task(ctx, "plugin:build", "DIR=plugins/examples/canary", "OUT="+wasm)
		out := task(ctx, "plugin:push", "FILE="+wasm, "REF="+reg+"/e2e/canary:v1")
		m := regexp.MustCompile(`module sha256 ([0-9a-f]{64})`).FindStringSubmatch(out)
		Expect(m).To(HaveLen(2), "plugin:push printed no module sha256:\n%s", out)
		sum := m[1]

		rp := `apiVersion: tailplane.dev/v1alpha1
kind: RoutingPlugin
metadata:
  name: canary-from-registry
spec:
  module:
    oci: {ref: "oci://` + reg + `/e2e/canary:v1"}
    sha256: ` + sum + `
  config: {header: X-From-Registry, headerValue: "yes", backend: "web-canary:80"}
  capabilities: [route]
  failurePolicy: Open
  targets:
    targetRefs: [{kind: Ingress, name: web}]
`
		out, err := devclusterStdin(rp, "kubectl", "apply", "-f", "-")
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(func() (string, error) {
			return devcluster("kubectl", "get", "routingplugin", "canary-from-registry", "-o",
				`jsonpath={.status.conditions[?(@.type=="Accepted")].reason} {.status.sha256} {.status.conditions[?(@.type=="Ready")].reason}`)
		}).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(2 * time.Second).Should(Equal("Compiled " + sum + " Loaded"))

		const site = "https://default-web-ingress.devcluster.ts.net/"
		Eventually(func() (string, error) {
			_, body, _, err := client.get(ctx, site, http.Header{"X-From-Registry": {"yes"}})
			return body, err
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(2 * time.Second).Should(ContainSubstring(`"pod":"web-canary-`))
		for range 3 {
			status, body, _, err := client.get(ctx, site, http.Header{"X-From-Registry": {"yes"}})
			Expect(err).NotTo(HaveOccurred())
			Expect(status).To(Equal(http.StatusOK), body)
			Expect(body).To(ContainSubstring(`"pod":"web-canary-`))
			_, body, _, err = client.get(ctx, site, nil)
			Expect(err).NotTo(HaveOccurred())
			Expect(body).To(ContainSubstring(`"pod":"web-stable-`))
		}
	}, SpecTimeout(8*time.Minute))
})

// task runs `go tool task ARGS...` in the repository, as an author would,
// and returns its output.
func task(ctx context.Context, args ...string) string {
	GinkgoHelper()
	cmd := gotask.Command(ctx, args...)
	cmd.Dir = suite.root
	out, err := cmd.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "go tool task %v:\n%s", args, out)
	return string(out)
}
