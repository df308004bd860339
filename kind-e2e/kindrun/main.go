// Command kindrun is go tool task e2e:kind: the kind-e2e operator suite on
// a kind cluster, for machines with Docker (docs/e2e.md, "kind").
//
//	kindrun -root R -assets A [-name tailplane-e2e] [-tag kind-e2e] [-keep] [-- go test args]
//	kindrun -down -root R -assets A [-name tailplane-e2e]
//
// It checks that a Docker engine answers, builds Tailplane's images for
// the engine's platform (go tool task images), creates a one-node kind
// cluster with kind's library (sigs.k8s.io/kind v0.33.0, node image
// kindest/node v1.37.0), starts devcluster's tailnet on the kind network's
// gateway (devcluster tailnet), loads the images into the node as `kind
// load image-archive` does, installs the Helm chart as go tool task dev does
// (deploy/manifests/devinstall) and runs kind-e2e/operator with
// TAILPLANE_E2E_DIR set, so the suite uses this cluster instead of starting
// devcluster. The tailnet stops and the cluster is deleted at the end, unless
// -keep.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
)

func main() {
	o, down, err := parseArgs(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:kind:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if down {
		err = Down(ctx, o, dockerHost{}, newKindLib())
	} else {
		err = Run(ctx, o, dockerHost{}, newKindLib())
	}
	if err != nil {
		msg := err.Error()
		if !strings.HasPrefix(msg, "e2e:kind") {
			msg = "e2e:kind: " + msg
		}
		fmt.Fprintln(os.Stderr, msg)
		os.Exit(1)
	}
}

func parseArgs(args []string) (Options, bool, error) {
	o := Options{Out: os.Stdout}
	fs := flag.NewFlagSet("kindrun", flag.ContinueOnError)
	fs.StringVar(&o.Root, "root", ".", "the repository")
	fs.StringVar(&o.Assets, "assets", "", "folder of the devcluster binary (go tool task test:assets); default ROOT/.cache/assets")
	fs.StringVar(&o.Name, "name", "tailplane-e2e", "kind cluster name")
	fs.StringVar(&o.Tag, "tag", "kind-e2e", "tag of the images built and loaded")
	fs.StringVar(&o.Dir, "dir", "", "e2e:kind's folder (kubeconfig, tailnet, image archives, logs); default ROOT/.cache/kind-e2e")
	fs.BoolVar(&o.Keep, "keep", false, "leave the kind cluster running at the end")
	down := fs.Bool("down", false, "delete the cluster, stop its tailnet and remove the folder instead")
	if err := fs.Parse(args); err != nil {
		return o, false, err
	}
	o.SuiteArgs = fs.Args()
	root, err := filepath.Abs(o.Root)
	if err != nil {
		return o, false, err
	}
	o.Root = root
	o.Assets = cmp.Or(o.Assets, filepath.Join(root, ".cache", "assets"))
	o.Dir = cmp.Or(o.Dir, filepath.Join(root, ".cache", "kind-e2e"))
	if o.Assets, err = filepath.Abs(o.Assets); err != nil {
		return o, false, err
	}
	if o.Dir, err = filepath.Abs(o.Dir); err != nil {
		return o, false, err
	}
	o.Network = cmp.Or(os.Getenv("KIND_EXPERIMENTAL_DOCKER_NETWORK"), "kind")
	if exe := os.Getenv("TAILPLANE_TASK_EXE"); exe != "" {
		o.Task = []string{exe}
	}
	return o, *down, nil
}
