// Package operator is the operator's end-to-end suite on devcluster: it runs
// the README's `go tool task dev` (build, devcluster up, the operator
// installed from the Helm chart deploy/chart/tailplane-operator by
// deploy/manifests/devinstall), applies the seed's exposed Service and
// Ingress with echo backends, and reaches both through the tailnet with
// `devcluster curl`.
//
// TAILPLANE_E2E_NODE=real runs it on devcluster's real node (docs/e2e.md):
// the suite first builds the operator and proxy images with deploy/images
// (linux/amd64, into .cache/e2e-images), `go tool task dev` starts
// `devcluster up --node real --import` with them, and the chart installs
// with its real image references; the operator's namespace and default are
// labelled with the restricted Pod Security Standard. Unset or "process":
// the process node.
package operator

import (
	"bufio"
	"context"
	"fmt"
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

func TestOperator(t *testing.T) {
	RegisterFailHandler(Fail)
	suiteConfig, reporterConfig := GinkgoConfiguration()
	// Specs labelled with the other node's label cannot run on this one;
	// go tool task e2e runs the suite on the real node, then the
	// process-node specs on the process node.
	filter := "!" + realNodeOnly
	if os.Getenv("TAILPLANE_E2E_NODE") == "real" {
		filter = "!" + processNodeOnly
	}
	if suiteConfig.LabelFilter != "" {
		filter = "(" + suiteConfig.LabelFilter + ") && " + filter
	}
	suiteConfig.LabelFilter = filter
	RunSpecs(t, "operator on devcluster", suiteConfig, reporterConfig)
}

// realNodeOnly labels the specs that need containers, kube-proxy's
// ClusterIPs or CoreDNS: only the real node runs them.
const realNodeOnly = "real-node"

// processNodeOnly labels the specs that need the process node: they use
// something of devcluster's that only host processes reach, such as its OCI
// registry on 127.0.0.1.
const processNodeOnly = "process-node"

// suite is the running devcluster with the operator.
var suite = &suiteState{}

type suiteState struct {
	root, dir, devcluster string
	// real is true on the real node (TAILPLANE_E2E_NODE=real); images is
	// then the folder of the image layouts imported into containerd.
	real    bool
	images  string
	cmd     *exec.Cmd
	exited  chan struct{}
	exitErr error // what `go tool task dev` ended with
}

var _ = BeforeSuite(func(ctx SpecContext) {
	assets := os.Getenv("TAILPLANE_TEST_ASSETS")
	Expect(assets).NotTo(BeEmpty(), "TAILPLANE_TEST_ASSETS is not set: run `go tool task test:assets` and export TAILPLANE_TEST_ASSETS=$(go tool task test:assets-dir)")
	suite.devcluster = filepath.Join(assets, "devcluster")
	Expect(suite.devcluster).To(BeAnExistingFile())
	root, err := filepath.Abs("../..")
	Expect(err).NotTo(HaveOccurred())
	suite.root = root
	if ext := os.Getenv(externalDirEnv); ext != "" {
		externalDir, err = filepath.Abs(ext)
		Expect(err).NotTo(HaveOccurred())
		Expect(filepath.Join(externalDir, "kubeconfig")).To(BeAnExistingFile())
		Expect(filepath.Join(externalDir, "tailnet.env")).To(BeAnExistingFile())
		return
	}
	dir, err := os.MkdirTemp("", "devcluster-operator-")
	Expect(err).NotTo(HaveOccurred())
	suite.dir = dir
	switch node := os.Getenv("TAILPLANE_E2E_NODE"); node {
	case "", "process":
	case "real":
		suite.real = true
		suite.buildImages(ctx)
	default:
		Fail(fmt.Sprintf("TAILPLANE_E2E_NODE=%q: want process or real", node))
	}
	suite.startDev(ctx)
	if suite.real {
		// The suite's own tailnet clients (tsnet) may dial the control
		// server over TLS on the bridge address's port 443 (docs/e2e.md).
		Expect(os.Setenv("SSL_CERT_FILE", filepath.Join(dir, "cluster", "acme-ca.pem"))).To(Succeed())
		// Workloads of the specs run under the restricted standard too.
		out, err := devcluster("kubectl", "label", "namespace", "default", "--overwrite",
			"pod-security.kubernetes.io/enforce=restricted", "pod-security.kubernetes.io/warn=restricted")
		Expect(err).NotTo(HaveOccurred(), out)
	}
}, NodeTimeout(30*time.Minute))

// buildImages builds the operator and proxy images (linux/amd64) with
// deploy/images, as `go tool task images PLATFORMS=linux/amd64` does, into
// .cache/e2e-images; `up --import` names them ghcr.io/tailplane/<image>:latest,
// the chart's references.
func (sc *suiteState) buildImages(ctx context.Context) {
	GinkgoHelper()
	sc.images = filepath.Join(sc.root, ".cache", "e2e-images")
	start := time.Now()
	cmd := exec.CommandContext(ctx, "go", "run", "./deploy/images", "build", "-out", sc.images, "-platforms", "linux/amd64", "-tag", "latest")
	cmd.Dir = sc.root
	out, err := cmd.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), string(out))
	AddReportEntry("image build", fmt.Sprintf("go run ./deploy/images build (linux/amd64): %s", time.Since(start).Round(time.Second)))
	GinkgoWriter.Printf("TIME image build (linux/amd64): %s\n", time.Since(start).Round(time.Second))
}

// startDev runs `go tool task dev` on the suite's folder and waits until
// the operator is installed. Its output is appended to the suite's log.
func (sc *suiteState) startDev(ctx context.Context) {
	GinkgoHelper()
	logFile, err := os.OpenFile(sc.dir+".log", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	Expect(err).NotTo(HaveOccurred())
	// Exactly the README's main command, so that CI proves it works, with
	// a second tailnet for the Tailnet specs (tailnet_test.go).
	devArgs := "DEV_ARGS=--tailnets=2"
	if sc.real {
		devArgs += " --node real --import " + sc.images
	}
	cmd := gotask.Command(context.Background(), "dev", "DEV_DIR="+filepath.Join(sc.dir, "cluster"), devArgs)
	cmd.Dir = sc.root
	// Its own process group: SIGINT reaches task, devinstall and
	// devcluster alike, as Ctrl-C in a terminal would.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	installed, exited := startInstalling(cmd, logFile, &sc.exitErr)
	sc.cmd, sc.exited = cmd, exited
	select {
	case <-installed:
	case <-exited:
		Fail("`go tool task dev` exited before the operator was installed; see " + sc.dir + ".log")
	case <-ctx.Done():
		Fail("`go tool task dev` did not install the operator in time; see " + sc.dir + ".log")
	}
}

// startInstalling starts cmd, a devinstall (or go tool task dev), with its
// output appended to logFile: installed closes once it says the operator is
// installed, exited once it ended (with *exitErr set and logFile closed).
func startInstalling(cmd *exec.Cmd, logFile *os.File, exitErr *error) (installed, exited chan struct{}) {
	GinkgoHelper()
	cmd.Stderr = logFile
	stdout, err := cmd.StdoutPipe()
	Expect(err).NotTo(HaveOccurred())
	Expect(cmd.Start()).To(Succeed())
	installed, exited = make(chan struct{}), make(chan struct{})
	go func() {
		lines := bufio.NewScanner(stdout)
		for lines.Scan() {
			_, _ = logFile.WriteString(lines.Text() + "\n")
			if strings.Contains(lines.Text(), "operator is installed") {
				close(installed)
			}
		}
	}()
	go func() { *exitErr = cmd.Wait(); logFile.Close(); close(exited) }()
	return installed, exited
}

// stopDev is Ctrl-C: SIGINT to the process group of `go tool task dev`. It
// reports whether dev ended within a minute (else it is killed).
func (sc *suiteState) stopDev() bool {
	skipIfExternal("restarts go tool task dev")
	_ = syscall.Kill(-sc.cmd.Process.Pid, syscall.SIGINT)
	select {
	case <-sc.exited:
		return true
	case <-time.After(time.Minute):
		_ = syscall.Kill(-sc.cmd.Process.Pid, syscall.SIGKILL)
		<-sc.exited
		return false
	}
}

var _ = AfterSuite(func() {
	var stoppedCleanly bool
	if suite.cmd != nil && suite.cmd.Process != nil {
		stoppedCleanly = suite.stopDev()
		_ = exec.Command(suite.devcluster, "down", "--dir", filepath.Join(suite.dir, "cluster")).Run()
	}
	if suite.dir != "" {
		_ = os.RemoveAll(suite.dir)
	}
	if suite.cmd != nil && suite.cmd.Process != nil {
		// Ctrl-C is the documented way to stop `go tool task dev`: it must
		// end it, with exit status 0 and no "task: Failed to run task".
		Expect(stoppedCleanly).To(BeTrue(), "`go tool task dev` did not stop within a minute of Ctrl-C")
		Expect(suite.exitErr).NotTo(HaveOccurred(), "`go tool task dev` after Ctrl-C; see "+suite.dir+".log")
		log, err := os.ReadFile(suite.dir + ".log")
		Expect(err).NotTo(HaveOccurred())
		Expect(string(log)).NotTo(ContainSubstring("Failed to run task"))
	}
})

// The log of `go tool task dev` stays only when something failed.
var _ = ReportAfterSuite("go tool task dev log", func(r Report) {
	if suite.dir == "" {
		return
	}
	if r.SuiteSucceeded {
		_ = os.Remove(suite.dir + ".log")
	} else {
		fmt.Fprintln(os.Stderr, "go tool task dev log:", suite.dir+".log")
	}
})

// devcluster runs a devcluster subcommand against the suite's cluster.
func devcluster(args ...string) (string, error) { return devclusterStdin("", args...) }

// devclusterStdin is devcluster with stdin (none when empty).
func devclusterStdin(stdin string, args ...string) (string, error) {
	return devclusterAt(suite.clusterDir(), stdin, args...)
}

// devclusterAt runs a devcluster subcommand against the cluster in dir,
// with stdin (none when empty).
func devclusterAt(dir, stdin string, args ...string) (string, error) {
	sub, rest := args[0], args[1:]
	cmd := exec.Command(suite.devcluster, append([]string{sub, "--dir", dir}, rest...)...)
	cmd.Dir = suite.root
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// externalDirEnv names a folder laid out as devcluster's (kubeconfig,
// tailnet.env, ca.pem) whose cluster is already up with the operator
// installed from the chart as `go tool task dev` installs it, such as go
// tool task e2e:kind's kind cluster. With it set, the suite runs against that
// cluster: it starts and stops nothing, and skips the specs that need
// devcluster itself (skipIfExternal).
const externalDirEnv = "TAILPLANE_E2E_DIR"

// externalDir is $TAILPLANE_E2E_DIR's folder, "" for the suite's own
// devcluster.
var externalDir string

// clusterDir is the devcluster folder the specs use: $TAILPLANE_E2E_DIR's,
// or the suite's own devcluster's.
func (sc *suiteState) clusterDir() string {
	if externalDir != "" {
		return externalDir
	}
	return filepath.Join(sc.dir, "cluster")
}

// skipIfExternal skips a spec that needs devcluster itself when the suite
// runs against another cluster ($TAILPLANE_E2E_DIR), saying why.
func skipIfExternal(why string) {
	if externalDir != "" {
		Skip("needs devcluster itself (not " + externalDirEnv + "): " + why)
	}
}
