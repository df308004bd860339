// Package headscaletest starts a real Headscale for tests: `devcluster
// tailnet --control headscale` in a temporary folder, with the headscale
// binary that go tool task test:headscale puts next to devcluster
// (TAILPLANE_TEST_ASSETS). Tests built with -tags headscale use it.
//
// It imports internal/testenv and the standard library only.
package headscaletest

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tailplane/tailplane/internal/testenv"
)

// readyTimeout bounds Headscale's start.
const readyTimeout = 2 * time.Minute

// Start runs Headscale until the test ends and returns its tailnet.env:
// HEADSCALE_URL, HEADSCALE_API_KEY, TS_CONTROL_URL and the rest. args are
// further devcluster tailnet options, e.g. --policy FILE.
func Start(t testing.TB, args ...string) map[string]string {
	t.Helper()
	bin, err := testenv.Binary()
	if err != nil {
		t.Fatal(err)
	}
	hs := filepath.Join(filepath.Dir(bin), "headscale")
	if _, err := os.Stat(hs); err != nil {
		t.Fatalf("no headscale binary next to devcluster (%v): run go tool task test:headscale", err)
	}
	dir := t.TempDir()
	cmd := exec.Command(bin, append([]string{"tailnet", "--dir", dir, "--control", "headscale", "--headscale", hs}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	logFile, err := os.Create(filepath.Join(dir, "devcluster.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = logFile
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		<-exited
		logFile.Close()
	})
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "ready tailnet="); ok {
				ready <- rest
			}
		}
	}()
	var envFile string
	select {
	case envFile = <-ready:
	case <-exited:
		log, _ := os.ReadFile(logFile.Name())
		t.Fatalf("devcluster tailnet --control headscale exited:\n%s", log)
	case <-time.After(readyTimeout):
		t.Fatalf("devcluster tailnet --control headscale not ready in %s", readyTimeout)
	}
	b, err := os.ReadFile(envFile)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for line := range strings.Lines(string(b)) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok && !strings.HasPrefix(k, "#") {
			env[k] = v
		}
	}
	if env["HEADSCALE_URL"] == "" || env["HEADSCALE_API_KEY"] == "" {
		t.Fatalf("tailnet.env has no Headscale URL or API key: %v", env)
	}
	return env
}
