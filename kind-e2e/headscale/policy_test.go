//go:build headscale

package headscale

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"tailscale.com/envknob"
	"tailscale.com/ipn/store/mem"
	"tailscale.com/net/netns"
	"tailscale.com/tsnet"

	"github.com/tailplane/tailplane/kind-e2e/internal/headscale"
)

// openPolicy is the suite's --policy file at the start: no rules, so
// Headscale lets everyone reach everything.
const openPolicy = "{}\n"

// policyFile is the --policy file devcluster watches.
func policyFile() string { return filepath.Join(suite.dir, "policy.hujson") }

// userClient is a tailnet node of a Headscale user (a user's laptop): an
// ephemeral tsnet node joined with a pre-auth key of that user.
type userClient struct {
	node *tsnet.Server
	http *http.Client
}

func joinAs(ctx context.Context, user, hostname string) *userClient {
	GinkgoHelper()
	env := tailnetEnv()
	key, err := headscale.MintUserKey(ctx, env["HEADSCALE_URL"], env["HEADSCALE_API_KEY"], user, true, nil, 10*time.Minute)
	Expect(err).NotTo(HaveOccurred())
	netns.SetEnabled(false) // Headscale and the relay are on loopback
	envknob.SetNoLogsNoSupport()
	node := &tsnet.Server{ControlURL: env["TS_CONTROL_URL"], Hostname: hostname, AuthKey: key, Ephemeral: true,
		Store: new(mem.Store), Dir: GinkgoT().TempDir(), Logf: func(string, ...any) {}, UserLogf: func(string, ...any) {}}
	_, err = node.Up(ctx)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(node.Close)
	// No keep-alives: every request is a new connection, which is what a
	// packet filter decides on (Tailscale's lets an established TCP flow
	// go on).
	return &userClient{node: node, http: &http.Client{Timeout: 5 * time.Second,
		Transport: &http.Transport{DialContext: node.Dial, DisableKeepAlives: true}}}
}

// get fetches url and returns the body.
func (c *userClient) get(url string) (string, error) {
	resp, err := c.http.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// nodeIP is the first tailnet address of the node Headscale lists as name.
func nodeIP(ctx context.Context, name string) (string, error) {
	nodes, err := listNodes(ctx)
	if err != nil {
		return "", err
	}
	i := slices.IndexFunc(nodes, func(n node) bool { return n.GivenName == name && len(n.IPAddresses) > 0 })
	if i < 0 {
		return "", fmt.Errorf("no node %s with an address yet", name)
	}
	return nodes[i].IPAddresses[0], nil
}

// The seed guide's least-privilege grant block, verbatim, as devcluster's
// --policy on Headscale (which has no grants: devcluster translates it into
// an ACL rule) with alice in group:dev (--group): through the proxy of an
// exposed Service with ports 443 and 5432 (tag:k8s), alice reaches 443,
// bob (outside the group) does not, and nobody reaches 5432. Before the
// policy both reach both ports, so the refusals are the policy's.
var _ = Describe("the seed's grants policy on Headscale", Ordered, func() {
	const exposed = `apiVersion: v1
kind: Service
metadata:
  name: policy-web
  annotations: {tailscale.com/expose: "true"}
spec:
  selector: {app: my-app}
  ports:
    - {name: https, port: 443, targetPort: 8080}
    - {name: db, port: 5432, targetPort: 8080}
`
	var alice, bob *userClient
	var ip string

	BeforeAll(func(ctx SpecContext) {
		manifest := filepath.Join(suite.dir, "policy-web.yaml")
		Expect(os.WriteFile(manifest, []byte(exposed), 0o644)).To(Succeed())
		out, err := devcluster("kubectl", "apply", "-f", "kind-e2e/operator/testdata/echo.yaml", "-f", manifest)
		Expect(err).NotTo(HaveOccurred(), out)
		DeferCleanup(func() { _, _ = devcluster("kubectl", "delete", "-f", manifest) })
		Eventually(nodeIP).WithContext(ctx).WithArguments("default-policy-web").WithTimeout(3 * time.Minute).WithPolling(2 * time.Second).
			Should(Not(BeEmpty()))
		ip, _ = nodeIP(ctx, "default-policy-web")
		alice, bob = joinAs(ctx, "alice@example.com", "alice-laptop"), joinAs(ctx, "bob@example.com", "bob-laptop")
	}, NodeTimeout(5*time.Minute))

	It("lets everyone reach both ports before the policy", func(ctx SpecContext) {
		for _, c := range []*userClient{alice, bob} {
			for _, port := range []string{"443", "5432"} {
				Eventually(c.get).WithContext(ctx).WithArguments("http://" + ip + ":" + port + "/").WithTimeout(2 * time.Minute).WithPolling(time.Second).
					Should(ContainSubstring(`"pod":"my-app-`))
			}
		}
	}, SpecTimeout(5*time.Minute))

	It("lets only group:dev reach 443, and nobody 5432, with the seed's grant", func(ctx SpecContext) {
		grant, err := os.ReadFile(filepath.Join(suite.root, "examples", "seed", "policy", "4-grants.json"))
		Expect(err).NotTo(HaveOccurred())
		Expect(os.WriteFile(policyFile(), grant, 0o644)).To(Succeed())
		DeferCleanup(func() { Expect(os.WriteFile(policyFile(), []byte(openPolicy), 0o644)).To(Succeed()) })
		denied := func(c *userClient, port string) func() error {
			return func() error {
				if body, err := c.get("http://" + ip + ":" + port + "/"); err == nil {
					return fmt.Errorf("reached port %s: %.80s", port, body)
				}
				return nil
			}
		}
		Eventually(ctx, denied(bob, "443")).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed(), "bob, outside group:dev, on 443")
		Eventually(alice.get).WithContext(ctx).WithArguments("http://"+ip+":443/").WithTimeout(time.Minute).WithPolling(time.Second).
			Should(ContainSubstring(`"pod":"my-app-`), "alice, in group:dev, on 443")
		Eventually(ctx, denied(alice, "5432")).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed(), "alice on 5432")
		for _, c := range []*userClient{alice, bob} {
			Consistently(ctx, denied(c, "5432")).WithTimeout(12*time.Second).WithPolling(time.Second).Should(Succeed(), "5432 is in no rule")
		}
		Consistently(ctx, denied(bob, "443")).WithTimeout(6*time.Second).WithPolling(time.Second).Should(Succeed(), "bob on 443")
		Expect(alice.get("http://"+ip+":443/")).To(ContainSubstring(`"pod":"my-app-`), "alice on 443, after all that")
	}, SpecTimeout(5*time.Minute))
})
