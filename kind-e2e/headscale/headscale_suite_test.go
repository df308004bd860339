//go:build headscale

// Package headscale is the end-to-end suite of Tailplane on Headscale: `go
// tool task dev` with devcluster up --control headscale (Headscale v0.27.1
// as the control server, the operator installed from the chart with
// headscale.url and headscale.apiKey), the seed's exposed Service and an
// Ingress with its own certificate carrying real traffic from a tailnet
// client on Headscale, their nodes deleted from Headscale with them, and
// the seed's grants policy (translated by devcluster) enforced between
// users' nodes and a proxy.
//
// Built only with -tags headscale (go tool task e2e:headscale): it needs
// the headscale binary of go tool task test:headscale, whose cold build is
// too long for go tool task test.
package headscale

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/tailplane/tailplane/kind-e2e/internal/gotask"
)

func TestHeadscale(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Tailplane on Headscale")
}

// suite is the running `go tool task dev --control headscale`.
var suite struct {
	root, dir, devcluster string
	cmd                   *exec.Cmd
	exited                chan struct{}
}

var _ = BeforeSuite(func(ctx SpecContext) {
	assets := os.Getenv("TAILPLANE_TEST_ASSETS")
	Expect(assets).NotTo(BeEmpty(), "TAILPLANE_TEST_ASSETS is not set: run go tool task e2e:headscale")
	suite.devcluster = filepath.Join(assets, "devcluster")
	Expect(filepath.Join(assets, "headscale")).To(BeAnExistingFile(), "go tool task test:headscale builds it")
	root, err := filepath.Abs("../..")
	Expect(err).NotTo(HaveOccurred())
	suite.root = root
	suite.dir = GinkgoT().TempDir()
	logFile, err := os.Create(filepath.Join(suite.dir, "dev.log"))
	Expect(err).NotTo(HaveOccurred())
	// The policy file starts open; policy_test.go writes the seed's grant
	// into it (devcluster re-reads it), with alice in group:dev.
	Expect(os.WriteFile(policyFile(), []byte(openPolicy), 0o644)).To(Succeed())
	cmd := gotask.Command(context.Background(), "dev", "DEV_DIR="+filepath.Join(suite.dir, "cluster"),
		"DEV_ARGS=--control headscale --policy "+policyFile()+" --group group:dev=alice@example.com")
	cmd.Dir = root
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stderr = logFile
	stdout, err := cmd.StdoutPipe()
	Expect(err).NotTo(HaveOccurred())
	Expect(cmd.Start()).To(Succeed())
	suite.cmd, suite.exited = cmd, make(chan struct{})
	installed := make(chan struct{})
	go func() {
		lines := bufio.NewScanner(stdout)
		for lines.Scan() {
			_, _ = logFile.WriteString(lines.Text() + "\n")
			if strings.Contains(lines.Text(), "operator is installed") {
				close(installed)
			}
		}
	}()
	go func() { _ = cmd.Wait(); logFile.Close(); close(suite.exited) }()
	select {
	case <-installed:
	case <-suite.exited:
		Fail("`go tool task dev -- --control headscale` exited before the operator was installed; see " + logFile.Name())
	case <-ctx.Done():
		Fail("the operator was not installed in time; see " + logFile.Name())
	}
}, NodeTimeout(15*time.Minute))

var _ = AfterSuite(func() {
	if suite.cmd == nil || suite.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-suite.cmd.Process.Pid, syscall.SIGINT)
	select {
	case <-suite.exited:
	case <-time.After(time.Minute):
		_ = syscall.Kill(-suite.cmd.Process.Pid, syscall.SIGKILL)
		_ = exec.Command(suite.devcluster, "down", "--dir", filepath.Join(suite.dir, "cluster")).Run()
	}
})

// devcluster runs a devcluster subcommand against the suite's cluster.
func devcluster(args ...string) (string, error) {
	cmd := exec.Command(suite.devcluster, append([]string{args[0], "--dir", filepath.Join(suite.dir, "cluster")}, args[1:]...)...)
	cmd.Dir = suite.root
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// headscaleCLI runs the headscale CLI against the suite's Headscale.
func headscaleCLI(ctx context.Context, args ...string) (string, error) {
	env := tailnetEnv()
	cmd := exec.CommandContext(ctx, filepath.Join(filepath.Dir(suite.devcluster), "headscale"), append([]string{"-c", env["HEADSCALE_CONFIG"]}, args...)...)
	out, err := cmd.Output()
	return string(out), err
}

// tailnetEnv reads the cluster's tailnet.env.
func tailnetEnv() map[string]string {
	GinkgoHelper()
	b, err := os.ReadFile(filepath.Join(suite.dir, "cluster", "tailnet.env"))
	Expect(err).NotTo(HaveOccurred())
	env := map[string]string{}
	for line := range strings.Lines(string(b)) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok && !strings.HasPrefix(k, "#") {
			env[k] = v
		}
	}
	return env
}
