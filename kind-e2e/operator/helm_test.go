package operator

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// `go tool task dev` installs the operator from the Helm chart with the Helm
// SDK (release tailscale-operator, namespace tailscale, --wait), and running
// the install again upgrades the release with the operator still ready.
var _ = Describe("the Helm release", Ordered, func() {
	// revisions lists the release's revisions as "<revision>=<status>", from
	// Helm's own records (the Secrets `helm status` and `helm history` read).
	revisions := func() (string, error) {
		out, err := devcluster("kubectl", "-n", "tailscale", "get", "secret", "-l", "owner=helm,name=tailscale-operator",
			"-o", `jsonpath={range .items[*]}{.metadata.labels.version}={.metadata.labels.status} {end}`)
		return strings.TrimSpace(out), err
	}

	// latest is the number of the newest revision, checking that it is the
	// deployed one and every older one superseded. It is 1 unless a spec
	// that installs again ran first: the restart spec (seed_test.go), which
	// runs `go tool task dev` again, or the API server proxy's
	// (apiserverproxy_test.go).
	latest := func() int {
		GinkgoHelper()
		out, err := revisions()
		Expect(err).NotTo(HaveOccurred())
		revs := strings.Fields(out)
		Expect(revs).NotTo(BeEmpty())
		for i, r := range revs {
			want := "superseded"
			if i == len(revs)-1 {
				want = "deployed"
			}
			Expect(r).To(Equal(fmt.Sprintf("%d=%s", i+1, want)), "revisions %s", out)
		}
		return len(revs)
	}

	It("is deployed, with the operator's Deployment ready", func() {
		latest()
		Expect(devcluster("kubectl", "-n", "tailscale", "get", "deployment", "operator", "-o", "jsonpath={.status.readyReplicas}")).To(Equal("1"))
		Expect(devcluster("kubectl", "-n", "tailscale", "get", "deployment", "operator", "-o",
			`jsonpath={.spec.template.spec.containers[0].env[?(@.name=="OPERATOR_HOSTNAME")].value}`)).To(Equal("tailscale-operator"))
	})

	// The default ProxyClass sets no TS_ env (devcluster's ACME server is
	// a chart value), so it earns no CustomTSEnvVar Warning: the default
	// configuration is warning-free.
	It("has a valid default ProxyClass without Warning Events", func(ctx SpecContext) {
		Eventually(func() (string, error) {
			return devcluster("kubectl", "get", "proxyclass", "devcluster", "-o", `jsonpath={.status.conditions[?(@.type=="ProxyClassReady")].status}`)
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(Equal("True"))
		Expect(devcluster("kubectl", "get", "events", "-A", "--ignore-not-found",
			"--field-selector", "involvedObject.kind=ProxyClass,involvedObject.name=devcluster,type=Warning",
			"-o", `jsonpath={range .items[*]}{.reason}: {.message}{"\n"}{end}`)).To(BeEmpty())
	}, SpecTimeout(2*time.Minute))

	// gatewayAPI.channel=experimental: the hook Job installs the
	// experimental channel's CRDs from the operator image and is gone once
	// it succeeded; installed again with the standard channel, the release
	// takes its CRDs back.
	It("installs the Gateway API's experimental channel by its hook, and goes back", func(ctx SpecContext) {
		crdAnnotation := func(crd, key string) (string, error) {
			return devcluster("kubectl", "get", "crd", crd, "-o", "jsonpath={.metadata.annotations."+strings.ReplaceAll(key, ".", `\.`)+"}")
		}
		before := latest()
		restore := withClusterValues("gatewayAPI:\n  channel: experimental\n")
		devinstall(ctx)
		Expect(latest()).To(Equal(before + 1))
		for _, crd := range []string{"httproutes.gateway.networking.k8s.io", "xmeshes.gateway.networking.x-k8s.io"} {
			Expect(crdAnnotation(crd, "gateway.networking.k8s.io/channel")).To(Equal("experimental"), crd)
			Expect(crdAnnotation(crd, "tailplane.dev/gateway-api-crds-release")).To(Equal("tailscale/tailscale-operator"), crd)
		}
		Expect(devcluster("kubectl", "-n", "tailscale", "get", "jobs,serviceaccounts", "-l", "app.kubernetes.io/name=tailplane-gateway-api-crds",
			"--ignore-not-found", "-o", "name")).To(BeEmpty())
		Expect(devcluster("kubectl", "get", "clusterrole", "tailplane-gateway-api-crds", "--ignore-not-found", "-o", "name")).To(BeEmpty())
		Expect(devcluster("kubectl", "-n", "tailscale", "get", "deployment", "operator", "-o", "jsonpath={.status.readyReplicas}")).To(Equal("1"))

		restore()
		devinstall(ctx)
		Expect(latest()).To(Equal(before + 2))
		Expect(crdAnnotation("httproutes.gateway.networking.k8s.io", "gateway.networking.k8s.io/channel")).To(Equal("standard"))
	}, SpecTimeout(8*time.Minute))

	// The runtime's state ConfigMaps belong to the operator's Deployment,
	// so that the garbage collector deletes them after helm uninstall
	// (docs/operator.md, "What is written where"): the operator finds its
	// Deployment with the chart's RBAC.
	It("gives the runtime's state ConfigMaps to the operator's Deployment", func(ctx SpecContext) {
		Eventually(func() ([]string, error) {
			out, err := devcluster("kubectl", "-n", "tailscale", "get", "configmap", "-l", "tailplane.dev/storage=tailplane-state", "-o",
				`jsonpath={range .items[*]}{.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name} {end}`)
			return strings.Fields(out), err
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(And(
			Not(BeEmpty()), HaveEach("Deployment/operator")))
	}, SpecTimeout(2*time.Minute))

	It("is upgraded when installed again", func(ctx SpecContext) {
		before := latest()
		devinstall(ctx)
		Expect(latest()).To(Equal(before + 1))
		Expect(devcluster("kubectl", "-n", "tailscale", "get", "deployment", "operator", "-o", "jsonpath={.status.readyReplicas}")).To(Equal("1"))
	}, SpecTimeout(4*time.Minute))
})

// withClusterValues adds doc (YAML) to the devcluster folder's values.yaml,
// which devinstall merges over its own values, and returns the function
// that puts the file back as it was.
func withClusterValues(doc string) (restore func()) {
	GinkgoHelper()
	path := filepath.Join(suite.clusterDir(), "values.yaml")
	old, err := os.ReadFile(path)
	existed := err == nil
	if err != nil && !os.IsNotExist(err) {
		Fail(err.Error())
	}
	Expect(os.WriteFile(path, append(append(old, '\n'), doc...), 0o644)).To(Succeed())
	return func() {
		GinkgoHelper()
		if existed {
			Expect(os.WriteFile(path, old, 0o644)).To(Succeed())
		} else {
			Expect(os.Remove(path)).To(Succeed())
		}
	}
}
