// Package realnode is the real node suite: it starts `devcluster up --node
// real` (kubelet, containerd, Debian's runc, the CNI plugins; binaries from
// TAILPLANE_TEST_ASSETS, built by `go tool task test:assets test:node`) in a
// temporary folder and checks what only a real node does: real containers
// from imported images, `kubectl logs` and `kubectl exec` through the
// kubelet, a read-only root filesystem enforced, and that `down` leaves no
// process, mount, cgroup or bridge behind.
package realnode

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/tailplane/tailplane/kind-e2e/internal/devup"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

func TestRealNode(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "devcluster real node")
}

// cluster is the devcluster the suite runs against.
type cluster struct {
	bin, dir, logPath string
	cmd               *exec.Cmd
	exited            chan struct{}
	client            kubernetes.Interface
	upTook            time.Duration
}

var suiteCluster = &cluster{}

var _ = BeforeSuite(func(ctx SpecContext) {
	assets := os.Getenv("TAILPLANE_TEST_ASSETS")
	Expect(assets).NotTo(BeEmpty(), "TAILPLANE_TEST_ASSETS is not set: run `go tool task test:assets test:node` and export TAILPLANE_TEST_ASSETS=$(go tool task test:assets-dir)")
	c := suiteCluster
	c.bin = filepath.Join(assets, "devcluster")
	Expect(c.bin).To(BeAnExistingFile())
	dir, err := os.MkdirTemp("", "devcluster-realnode-")
	Expect(err).NotTo(HaveOccurred())
	c.dir = dir
	c.up(ctx)
}, NodeTimeout(5*time.Minute))

var _ = AfterSuite(func() {
	c := suiteCluster
	if c.cmd != nil && c.cmd.ProcessState == nil {
		_ = exec.Command(c.bin, "down", "--dir", c.dir).Run()
		<-c.exited
	}
	if c.dir != "" {
		_ = os.RemoveAll(c.dir)
	}
})

// devcluster's log stays only when something failed.
var _ = ReportAfterSuite("devcluster log", func(r Report) {
	if r.SuiteSucceeded && suiteCluster.logPath != "" {
		_ = os.Remove(suiteCluster.logPath)
	} else if suiteCluster.logPath != "" {
		fmt.Fprintln(os.Stderr, "devcluster log:", suiteCluster.logPath, "cluster folder:", suiteCluster.dir)
	}
})

// up starts `devcluster up --node real` and waits for its ready line.
func (c *cluster) up(ctx context.Context) {
	GinkgoHelper()
	c.logPath = c.dir + ".log"
	start := time.Now()
	p, err := devup.Start(ctx, c.bin, c.dir, c.logPath, "--node", "real")
	if p != nil {
		c.cmd, c.exited = p.Cmd, p.Exited
	}
	Expect(err).NotTo(HaveOccurred())
	c.upTook = time.Since(start)
	GinkgoWriter.Printf("TIME devcluster up --node real: %s\n", c.upTook.Round(time.Millisecond))
	cfg, err := clientcmd.BuildConfigFromFlags("", p.Ready["kubeconfig"])
	Expect(err).NotTo(HaveOccurred())
	c.client, err = kubernetes.NewForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())
}

// kubectl runs `devcluster kubectl` (kubectl's own code) against the cluster.
func (c *cluster) kubectl(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, c.bin, append([]string{"kubectl", "--dir", c.dir}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}
