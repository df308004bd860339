package operator

import (
	"fmt"
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

	It("is upgraded when installed again", func(ctx SpecContext) {
		before := latest()
		devinstall(ctx)
		Expect(latest()).To(Equal(before + 1))
		Expect(devcluster("kubectl", "-n", "tailscale", "get", "deployment", "operator", "-o", "jsonpath={.status.readyReplicas}")).To(Equal("1"))
	}, SpecTimeout(4*time.Minute))
})
