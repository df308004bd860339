// Command devcluster runs a real Kubernetes control plane on loopback for
// Tailplane's tests and for trying Tailplane without a cluster.
//
//	devcluster apiserver --dir D   etcd + kube-apiserver; writes D/kubeconfig
//	devcluster up --dir D          the whole local cluster: control plane,
//	                               process node, service proxy, tailnet,
//	                               OCI registry (D/registry.env)
//	                               (--node real: kubelet, containerd, runc,
//	                               CNI, kube-proxy, CoreDNS instead of the
//	                               process node and service proxy;
//	                               --control headscale: Headscale as the
//	                               tailnet's control server)
//	devcluster down --dir D        stop what up started, leave nothing running
//	devcluster kubectl ARGS...     kubectl against D/kubeconfig (the binary
//	                               devcluster-kubectl beside devcluster)
//	devcluster curl URL            fetch URL from an ephemeral tailnet node
//	devcluster join                a userspace tailscaled and the tailscale
//	                               CLI on the tailnet, with a SOCKS5 proxy
//	devcluster tailnet --dir D     the tailnet alone, for a cluster elsewhere
//	                               (go tool task e2e:kind)
//
// It prints one line starting with "ready" once the cluster answers, and
// stops everything it started on SIGINT or SIGTERM.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"

	"github.com/tailplane/tailplane/kind-e2e/internal/controllers"
	"github.com/tailplane/tailplane/kind-e2e/internal/controlplane"
	"github.com/tailplane/tailplane/kind-e2e/internal/node"
)

const usage = `usage: devcluster <command> [flags]

commands:
  apiserver --dir D   start etcd and kube-apiserver on loopback, write D/kubeconfig
  up --dir D [--node process|real] [--control devcluster|headscale]
                      start the local cluster (control plane, process node,
                      service proxy, tailnet, OCI registry for plugins: its
                      address is in D/registry.env; or with --node real a
                      kubelet, containerd, runc, CNI, kube-proxy and CoreDNS
                      instead of the process node and proxy; with --control
                      headscale the tailnet's control server is Headscale,
                      from go tool task test:headscale); Ctrl-C or "down"
                      stops it
  down --dir D        stop a running "up" and everything it started
  kubectl ARGS...     kubectl against D/kubeconfig (--dir D or $DEVCLUSTER_DIR)
  curl [--dir D] [-X METHOD] [-H "Name: value"]... [-d BODY] [-i] [--no-follow] [-v] URL
                      send a request from an ephemeral tailnet node trusting
                      D/ca.pem; quiet unless -v
  join [--dir D] --tailscaled BIN --tailscale BIN [--proxy ADDR]
                      join the tailnet with a userspace tailscaled and the
                      tailscale CLI; serves a SOCKS5 and HTTP proxy into it
                      until Ctrl-C (go tool task dev:join)
  tailnet --dir D [--host IP]
                      the tailnet of "up" alone (control server, API, DERP,
                      STUN, ACME) on IP, for a cluster that runs elsewhere
                      (go tool task e2e:kind: the kind network's gateway);
                      writes D/tailnet.env; Ctrl-C or "down" stops it
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "apiserver":
		err = runAPIServer(os.Args[2:])
	case "up":
		err = runUp(os.Args[2:])
	case "down":
		err = runDown(os.Args[2:])
	case "kubectl":
		err = runKubectl(os.Args[2:])
	case "curl":
		err = runCurl(os.Args[2:])
	case "join":
		err = runJoin(os.Args[2:])
	case "tailnet":
		err = runTailnetOnly(os.Args[2:])
	case "component":
		err = runComponent(os.Args[2:])
	case "help", "-h", "--help":
		fmt.Print(usage)
	default:
		fmt.Fprintf(os.Stderr, "devcluster: unknown command %q\n\n%s", os.Args[1], usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "devcluster:", err)
		os.Exit(1)
	}
}

func runAPIServer(args []string) error {
	fs := flag.NewFlagSet("apiserver", flag.ExitOnError)
	dir := fs.String("dir", "", "cluster directory (state, logs, kubeconfig); required")
	_ = fs.Parse(args)
	if *dir == "" {
		return fmt.Errorf("apiserver: --dir is required")
	}
	abs, err := filepath.Abs(*dir)
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	c, err := controlplane.Start(ctx, abs, self)
	if err != nil {
		return err
	}
	defer c.Stop()
	fmt.Printf("ready kubeconfig=%s\n", c.Kubeconfig)
	select {
	case <-ctx.Done():
		return nil
	case err := <-c.Done():
		return fmt.Errorf("kube-apiserver exited: %v", err)
	}
}

// runComponent runs one Kubernetes component in this process. devcluster
// re-executes itself this way so each component has its own process, flags
// and global registries.
func runComponent(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("component: name required")
	}
	switch args[0] {
	case "kube-apiserver":
		cmd := apiserver.NewAPIServerCommand()
		cmd.SetArgs(args[1:])
		return cmd.Execute()
	case "kube-controller-manager":
		return runControllers(args[1:])
	case "pod-init":
		if len(args) != 2 {
			return fmt.Errorf("pod-init: want one spec file")
		}
		return node.RunInit(args[1])
	default:
		return fmt.Errorf("component: unknown %q", args[0])
	}
}

// runControllers is `component kube-controller-manager`: Kubernetes'
// controllers that devcluster needs (internal/controllers), until SIGTERM.
func runControllers(args []string) error {
	var cfg controllers.Config
	fs := flag.NewFlagSet("kube-controller-manager", flag.ContinueOnError)
	fs.StringVar(&cfg.Kubeconfig, "kubeconfig", "", "admin kubeconfig of the cluster")
	fs.StringVar(&cfg.ServiceAccountKeyFile, "service-account-private-key-file", "", "key that signs ServiceAccount token Secrets")
	fs.StringVar(&cfg.RootCAFile, "root-ca-file", "", "CA bundle published as ConfigMap kube-root-ca.crt")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return controllers.Run(ctx, cfg)
}
