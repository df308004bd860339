package operator

import (
	"fmt"
	"os/exec"
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
	// deployed one and every older one superseded. It is 1 unless the
	// restart spec (seed_test.go), which runs `go tool task dev` again and
	// so upgrades, ran first.
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

	It("is upgraded when installed again", func(ctx SpecContext) {
		before := latest()
		cmd := exec.CommandContext(ctx, "go", "run", "./deploy/manifests/devinstall", "--dir", suite.clusterDir())
		cmd.Dir = suite.root
		out, err := cmd.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(out))
		Expect(string(out)).To(ContainSubstring("operator is installed"))
		Expect(latest()).To(Equal(before + 1))
		Expect(devcluster("kubectl", "-n", "tailscale", "get", "deployment", "operator", "-o", "jsonpath={.status.readyReplicas}")).To(Equal("1"))
	}, SpecTimeout(4*time.Minute))
})
