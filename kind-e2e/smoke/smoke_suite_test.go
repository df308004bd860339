// Package smoke is the devcluster smoke suite: it starts `devcluster up` (the
// binary from TAILPLANE_TEST_ASSETS, built by `go tool task test:assets`) in
// a temporary folder and checks the cluster, the service proxy, the tailnet
// with real certificates, and that `down` leaves nothing behind.
package smoke

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tailplane/tailplane/kind-e2e/internal/devup"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// cluster is the devcluster the suite runs against.
type cluster struct {
	bin        string
	dir        string
	logPath    string
	cmd        *exec.Cmd
	exited     chan struct{}
	kubeconfig string
	env        map[string]string
	config     *rest.Config
	client     kubernetes.Interface
}

func TestSmoke(t *testing.T) {
	RegisterFailHandler(Fail)
	dir, err := os.MkdirTemp("", "devcluster-smoke-")
	if err != nil {
		t.Fatal(err)
	}
	suiteCluster.dir = dir
	// tailscale's certificate code uses http.DefaultClient, so this process
	// must trust the ACME server through SSL_CERT_FILE, set before anything
	// loads the system roots. devcluster writes the file at up.
	t.Setenv("SSL_CERT_FILE", filepath.Join(dir, "acme-ca.pem"))
	RunSpecs(t, "devcluster smoke")
}

var suiteCluster = &cluster{}

var _ = BeforeSuite(func(ctx SpecContext) {
	assets := os.Getenv("TAILPLANE_TEST_ASSETS")
	Expect(assets).NotTo(BeEmpty(), "TAILPLANE_TEST_ASSETS is not set: run `go tool task test:assets` and export TAILPLANE_TEST_ASSETS=$(go tool task test:assets-dir)")
	suiteCluster.bin = filepath.Join(assets, "devcluster")
	Expect(suiteCluster.bin).To(BeAnExistingFile())
	suiteCluster.up(ctx)
}, NodeTimeout(3*time.Minute))

var _ = AfterSuite(func() {
	c := suiteCluster
	if c.cmd != nil && c.cmd.ProcessState == nil {
		_ = exec.Command(c.bin, "down", "--dir", c.dir).Run()
		<-c.exited
	}
	_ = os.RemoveAll(c.dir)
})

// devcluster's log stays only when something failed.
var _ = ReportAfterSuite("devcluster log", func(r Report) {
	if r.SuiteSucceeded && suiteCluster.logPath != "" {
		_ = os.Remove(suiteCluster.logPath)
	} else if suiteCluster.logPath != "" {
		fmt.Fprintln(os.Stderr, "devcluster log:", suiteCluster.logPath)
	}
})

// up starts `devcluster up` and waits for its ready line.
func (c *cluster) up(ctx context.Context) {
	GinkgoHelper()
	c.logPath = c.dir + ".log"
	p, err := devup.Start(ctx, c.bin, c.dir, c.logPath, "--tailnets", "2")
	if p != nil {
		c.cmd, c.exited = p.Cmd, p.Exited
	}
	Expect(err).NotTo(HaveOccurred())
	fields := p.Ready
	c.kubeconfig = fields["kubeconfig"]
	c.config, err = clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	Expect(err).NotTo(HaveOccurred())
	c.client, err = kubernetes.NewForConfig(c.config)
	Expect(err).NotTo(HaveOccurred())
	c.env, err = readEnv(fields["tailnet"])
	Expect(err).NotTo(HaveOccurred())
	// Read on every ACME call by tailscale's certificate code.
	Expect(os.Setenv("TS_DEBUG_ACME_DIRECTORY_URL", c.env["TS_DEBUG_ACME_DIRECTORY_URL"])).To(Succeed())
}

// down runs `devcluster down` and waits for up to exit.
func (c *cluster) down() {
	GinkgoHelper()
	out, err := exec.Command(c.bin, "down", "--dir", c.dir).CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), string(out))
	Eventually(c.exited).WithTimeout(time.Minute).Should(BeClosed())
}

func readEnv(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	env := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok && !strings.HasPrefix(k, "#") {
			env[k] = v
		}
	}
	return env, nil
}

// processAlive reports whether pid still runs (and is not a zombie).
func processAlive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return err == nil && !strings.Contains(string(b), ") Z ")
}
