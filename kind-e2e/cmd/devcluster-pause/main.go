// Command devcluster-pause is the real node's pod sandbox ("pause")
// container, built from this source instead of pulled: it holds the pod's
// namespaces, reaps the zombies of processes that get re-parented to it (it
// is PID 1 when the pod shares its process namespace) and exits on SIGINT or
// SIGTERM, as Kubernetes' pause does.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-v" {
		os.Stdout.WriteString("devcluster-pause\n")
		return
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		// One SIGCHLD can stand for several exited children.
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
