package operator

import (
	"bufio"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	tsapi "tailscale.com/client/tailscale/v2"
)

// The seed's promise after installing: the admin console's Machines page
// shows a node named tailscale-operator with tag:k8s-operator. Here the
// Machines page is devcluster's Tailscale-compatible API, asked with the
// OAuth client from tailnet.env, as any API user would.
var _ = Describe("the operator's own tailnet device", func() {
	It("is on the tailnet as tailscale-operator, tagged tag:k8s-operator", func(ctx SpecContext) {
		vars := tailnetEnv()
		base, err := url.Parse(vars["TS_API_URL"])
		Expect(err).NotTo(HaveOccurred())
		client := &tsapi.Client{BaseURL: base, Tailnet: "-",
			Auth: &tsapi.OAuth{ClientID: vars["TS_API_CLIENT_ID"], ClientSecret: vars["TS_API_CLIENT_SECRET"]}}
		Eventually(func(g Gomega) {
			devices, err := client.Devices().List(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			var names []string
			for _, d := range devices {
				names = append(names, d.Hostname)
				if d.Hostname == "tailscale-operator" {
					g.Expect(d.Tags).To(ConsistOf("tag:k8s-operator"), "tags of device %s", d.Name)
					g.Expect(d.Name).To(HavePrefix("tailscale-operator."))
					g.Expect(d.Addresses).NotTo(BeEmpty())
					return
				}
			}
			g.Expect(names).To(ContainElement("tailscale-operator"), "devices on the tailnet")
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())

		// The chart sets OPERATOR_SECRET=operator: the node's state is in that
		// Secret (written with the operator's own RBAC).
		out, err := devcluster("kubectl", "get", "secret", "-n", "tailscale", "operator",
			"-o", `go-template={{index .data "_current-profile"}} {{index .data "_machinekey"}}`)
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(strings.Fields(out)).To(HaveLen(2), "state keys in Secret tailscale/operator: %q", out)

		// How long joining took, from the operator's own account: its first
		// log line, then the device's.
		out, err = devcluster("kubectl", "logs", "-n", "tailscale", "deploy/operator")
		Expect(err).NotTo(HaveOccurred(), out)
		first, _, _ := strings.Cut(out, "\n")
		for line := range strings.Lines(out) {
			if strings.Contains(line, "tailnet device is running") {
				AddReportEntry("operator device", first+"\n"+strings.TrimSpace(line))
			}
		}
	}, SpecTimeout(3*time.Minute))
})

// tailnetEnv reads devcluster's tailnet.env (KEY=VALUE lines).
func tailnetEnv() map[string]string {
	f, err := os.Open(filepath.Join(suite.clusterDir(), "tailnet.env"))
	Expect(err).NotTo(HaveOccurred())
	defer f.Close()
	vars := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok && !strings.HasPrefix(k, "#") {
			vars[k] = v
		}
	}
	Expect(sc.Err()).NotTo(HaveOccurred())
	return vars
}
