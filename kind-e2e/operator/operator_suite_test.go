// Package operator is the operator's end-to-end suite on devcluster: it
// builds tailplane-operator and tailplane-proxy, starts devcluster with the
// operator installed from deploy/manifests exactly as `go tool task dev` does
// (deploy/manifests/devinstall), applies the seed's exposed Service and
// Ingress with echo backends, and reaches both through the tailnet with
// `devcluster curl`.
package operator

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestOperator(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "operator on devcluster")
}

// suite is the running devcluster with the operator.
var suite struct {
	root, dir, devcluster string
	cmd                   *exec.Cmd
	exited                chan struct{}
}

var _ = BeforeSuite(func(ctx SpecContext) {
	assets := os.Getenv("TAILPLANE_TEST_ASSETS")
	Expect(assets).NotTo(BeEmpty(), "TAILPLANE_TEST_ASSETS is not set: run `go tool task test:assets` and export TAILPLANE_TEST_ASSETS=$(go tool task test:assets-dir)")
	suite.devcluster = filepath.Join(assets, "devcluster")
	Expect(suite.devcluster).To(BeAnExistingFile())
	root, err := filepath.Abs("../..")
	Expect(err).NotTo(HaveOccurred())
	suite.root = root
	dir, err := os.MkdirTemp("", "devcluster-operator-")
	Expect(err).NotTo(HaveOccurred())
	suite.dir = dir
	bin := filepath.Join(dir, "bin")
	build := exec.Command("go", "build", "-o", bin+"/", "./cmd/tailplane-operator", "./cmd/tailplane-proxy", "./deploy/manifests/devinstall")
	build.Dir = root
	out, err := build.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), string(out))

	logFile, err := os.Create(dir + ".log")
	Expect(err).NotTo(HaveOccurred())
	// The binary itself, not `go run`, so that SIGINT at the end reaches it.
	cmd := exec.Command(filepath.Join(bin, "devinstall"), "--dir", filepath.Join(dir, "cluster"), "--up", suite.devcluster, "--bin", bin)
	cmd.Dir = root
	cmd.Stderr = logFile
	stdout, err := cmd.StdoutPipe()
	Expect(err).NotTo(HaveOccurred())
	Expect(cmd.Start()).To(Succeed())
	suite.cmd, suite.exited = cmd, make(chan struct{})
	installed := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			_, _ = logFile.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), "operator is installed") {
				close(installed)
			}
		}
	}()
	go func() { _ = cmd.Wait(); close(suite.exited) }()
	select {
	case <-installed:
	case <-suite.exited:
		Fail("devinstall exited before the operator was installed; see " + dir + ".log")
	case <-ctx.Done():
		Fail("devinstall did not finish in time; see " + dir + ".log")
	}
}, NodeTimeout(6*time.Minute))

var _ = AfterSuite(func() {
	if suite.cmd != nil && suite.cmd.Process != nil {
		_ = suite.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-suite.exited:
		case <-time.After(time.Minute):
			_ = suite.cmd.Process.Kill()
		}
		_ = exec.Command(suite.devcluster, "down", "--dir", filepath.Join(suite.dir, "cluster")).Run()
	}
	if suite.dir != "" {
		_ = os.RemoveAll(suite.dir)
	}
})

// devcluster runs a devcluster subcommand against the suite's cluster.
func devcluster(args ...string) (string, error) {
	sub, rest := args[0], args[1:]
	cmd := exec.Command(suite.devcluster, append([]string{sub, "--dir", filepath.Join(suite.dir, "cluster")}, rest...)...)
	cmd.Dir = suite.root
	out, err := cmd.CombinedOutput()
	return string(out), err
}
