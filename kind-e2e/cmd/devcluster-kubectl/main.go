// Command devcluster-kubectl is kubectl (k8s.io/kubectl at kind-e2e's
// pinned version), which `devcluster kubectl` runs against a cluster
// folder's kubeconfig. It is a binary of its own so that devcluster, which
// every first `go tool task dev` builds, does not link kubectl's 190
// packages; `go tool task dev:kubectl` and the test tasks build it.
//
// It imports k8s.io/kubectl and k8s.io/component-base.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	kubectlcmd "k8s.io/kubectl/pkg/cmd"
)

func main() {
	os.Exit(cli.Run(kubectlcmd.NewDefaultKubectlCommand()))
}
