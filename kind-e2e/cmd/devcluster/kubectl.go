package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
)

// kubectlBinary is the kubectl `devcluster kubectl` runs: devcluster-kubectl
// in devcluster's own folder (go tool task dev:kubectl builds it there).
const kubectlBinary = "devcluster-kubectl"

// runKubectl runs kubectl against the cluster directory's kubeconfig: --dir
// D first, else $DEVCLUSTER_DIR, else ./.devcluster. An explicit
// --kubeconfig in args wins. kubectl's exit status becomes devcluster's.
func runKubectl(args []string) error {
	dir := os.Getenv("DEVCLUSTER_DIR")
	if dir == "" {
		dir = ".devcluster"
	}
	if len(args) >= 2 && args[0] == "--dir" {
		dir, args = args[1], args[2:]
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if _, err := os.Stat(kubeconfig); err != nil {
		return fmt.Errorf("kubectl: %s: %w (is devcluster up running for %s?)", kubeconfig, err, dir)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	bin := filepath.Join(filepath.Dir(self), kubectlBinary)
	if _, err := os.Stat(bin); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("kubectl: %s is not built; go tool task dev:kubectl builds it (or: go build -C kind-e2e -o %s ./cmd/devcluster-kubectl)", bin, bin)
	}
	cmd := exec.Command(bin, append([]string{"--kubeconfig", kubeconfig}, args...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			// kubectl printed its error already; keep its exit status.
			os.Exit(exit.ExitCode())
		}
		return fmt.Errorf("kubectl: %w", err)
	}
	return nil
}
