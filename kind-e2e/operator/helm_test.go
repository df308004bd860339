package operator

import (
	"os/exec"
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

	It("is deployed, with the operator's Deployment ready", func() {
		Expect(revisions()).To(Equal("1=deployed"))
		Expect(devcluster("kubectl", "-n", "tailscale", "get", "deployment", "operator", "-o", "jsonpath={.status.readyReplicas}")).To(Equal("1"))
		Expect(devcluster("kubectl", "-n", "tailscale", "get", "deployment", "operator", "-o",
			`jsonpath={.spec.template.spec.containers[0].env[?(@.name=="OPERATOR_HOSTNAME")].value}`)).To(Equal("tailscale-operator"))
	})

	It("is upgraded when installed again", func(ctx SpecContext) {
		cmd := exec.CommandContext(ctx, "go", "run", "./deploy/manifests/devinstall", "--dir", filepath.Join(suite.dir, "cluster"))
		cmd.Dir = suite.root
		out, err := cmd.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(out))
		Expect(string(out)).To(ContainSubstring("operator is installed"))
		Expect(revisions()).To(Equal("1=superseded 2=deployed"))
		Expect(devcluster("kubectl", "-n", "tailscale", "get", "deployment", "operator", "-o", "jsonpath={.status.readyReplicas}")).To(Equal("1"))
	}, SpecTimeout(4*time.Minute))
})
