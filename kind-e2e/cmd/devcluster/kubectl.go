package main

import (
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/component-base/cli"
	kubectlcmd "k8s.io/kubectl/pkg/cmd"
)

// runKubectl runs kubectl (built from k8s.io/kubectl) against the cluster
// directory's kubeconfig: --dir D first, else $DEVCLUSTER_DIR, else
// ./.devcluster. An explicit --kubeconfig in args wins.
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
	cmd := kubectlcmd.NewDefaultKubectlCommand()
	cmd.SetArgs(append([]string{"--kubeconfig", kubeconfig}, args...))
	if err := cli.RunNoErrOutput(cmd); err != nil {
		// kubectl printed the error already; keep its exit status.
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	return nil
}
