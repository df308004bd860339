package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	"sigs.k8s.io/yaml"
)

// Options are e2e:kind's settings.
type Options struct {
	// Root is the repository; Assets the folder of the devcluster binary
	// (go tool task test:assets), whose kubectl and curl the suite uses and
	// whose `tailnet` command serves the tailnet.
	Root, Assets string
	// Name is the kind cluster's name; Tag the images' tag.
	Name, Tag string
	// Dir is e2e:kind's folder (default Root/.cache/kind-e2e): the cluster's
	// kubeconfig, the tailnet's state and tailnet.env, the image archives,
	// values.yaml and the logs. The suite reads it as TAILPLANE_E2E_DIR.
	Dir string
	// Network is the Docker network kind puts its nodes on
	// (KIND_EXPERIMENTAL_DOCKER_NETWORK, default "kind").
	Network string
	// Keep leaves the kind cluster running at the end (KEEP=1).
	Keep bool
	// SuiteArgs go to `go test` after the package (-ginkgo.focus=...).
	SuiteArgs []string
	// Task is the command that runs a task (default go tool task); under
	// `go tool task e2e:kind`, the running task binary (TAILPLANE_TASK_EXE),
	// which go tool task would otherwise compile again under the
	// Taskfile's build flags.
	Task []string
	// Out is where progress goes.
	Out io.Writer
}

// Command is one command e2e:kind runs: in Dir, with Env added to its
// own environment.
type Command struct {
	Dir  string
	Env  []string
	Args []string
	// Log is the file a background command's output goes to ("": the
	// terminal).
	Log string
}

func (c Command) String() string {
	s := strings.Join(c.Args, " ")
	if len(c.Env) > 0 {
		s = strings.Join(c.Env, " ") + " " + s
	}
	if c.Dir != "" {
		s = "(cd " + c.Dir + ") " + s
	}
	return s
}

// Host is what e2e:kind does on this machine besides kind's library: the
// Docker CLI's checks, the commands it runs and this machine's addresses.
type Host interface {
	// DockerInfo is `docker info`: the engine's version and architecture
	// (uname -m: x86_64, aarch64).
	DockerInfo(ctx context.Context) (version, arch string, err error)
	// NetworkGateway is the IPv4 gateway of a Docker network: this
	// machine's address on it, which containers on it reach it at.
	NetworkGateway(ctx context.Context, network string) (netip.Addr, error)
	// Addrs are this machine's interface addresses.
	Addrs() ([]netip.Addr, error)
	// Run runs a command to its end, its output on the terminal.
	Run(ctx context.Context, c Command) error
	// Start starts a command in the background and waits for a line of
	// its standard output that starts with ready; Stop ends it (SIGINT).
	Start(ctx context.Context, c Command, ready string) (stop func() error, err error)
}

// Kind is the part of kind's library (sigs.k8s.io/kind/pkg/cluster) that
// e2e:kind uses, with the Docker provider.
type Kind interface {
	// Exists reports whether a cluster of this name exists.
	Exists(name string) (bool, error)
	// Create creates the cluster and writes its kubeconfig (a context
	// kind-NAME) to kubeconfig, not to ~/.kube/config.
	Create(name string, cfg *v1alpha4.Cluster, kubeconfig string) error
	// LoadImageArchive loads an image archive into every node of the
	// cluster, as `kind load image-archive` does.
	LoadImageArchive(name, archive string) error
	// ReadNodeFile reads a file of the cluster's control-plane node.
	ReadNodeFile(name, path string) ([]byte, error)
	// Delete deletes the cluster and its context in kubeconfig.
	Delete(name, kubeconfig string) error
}

// ErrNoDocker starts the message of every failure to reach Docker.
const noDocker = "e2e:kind needs a Docker engine"

// goArch maps the engine's architecture to Go's.
func goArch(machine string) (string, error) {
	switch machine {
	case "x86_64", "amd64":
		return "amd64", nil
	case "aarch64", "arm64":
		return "arm64", nil
	}
	return "", fmt.Errorf("the Docker engine runs on %q: Tailplane's images are built for amd64 and arm64", machine)
}

// Run is go tool task e2e:kind: check Docker, build the images, create the
// kind cluster, start devcluster's tailnet on the kind network's gateway,
// load the images, install the chart and run the operator suite against
// the cluster. The tailnet stops and the cluster is deleted at the end
// (unless o.Keep), whatever happened.
func Run(ctx context.Context, o Options, h Host, k Kind) (err error) {
	version, machine, err := h.DockerInfo(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", noDocker, err)
	}
	arch, err := goArch(machine)
	if err != nil {
		return err
	}
	fmt.Fprintf(o.Out, "e2e:kind: Docker %s (linux/%s); kind cluster %q from %s\n", version, arch, o.Name, NodeImage)
	if exists, err := k.Exists(o.Name); err != nil {
		return fmt.Errorf("%s: kind cannot list clusters: %w", noDocker, err)
	} else if exists {
		return fmt.Errorf("a kind cluster named %q exists already (left by KEEP=1 or an interrupted run): go tool task e2e:kind:down deletes it", o.Name)
	}
	// A tailnet left by a run that was killed keeps its pid file there.
	if _, err := os.Stat(filepath.Join(o.Dir, "devcluster.pid")); err == nil {
		return fmt.Errorf("a devcluster tailnet of an earlier run may still be running for %s: go tool task e2e:kind:down stops it", o.Dir)
	}
	if err := os.RemoveAll(o.Dir); err != nil {
		return err
	}
	imagesDir := filepath.Join(o.Dir, "images")
	if err := os.MkdirAll(imagesDir, 0o755); err != nil {
		return err
	}

	// 1. The images: deploy/images' operator and proxy for the engine's
	// platform, and the echo backend as a static binary.
	task := o.Task
	if len(task) == 0 {
		task = []string{"go", "tool", "task"}
	}
	if err := h.Run(ctx, Command{Dir: o.Root, Args: append(slices.Clip(task), "images", "PLATFORMS=linux/"+arch, "TAG="+o.Tag)}); err != nil {
		return fmt.Errorf("build the images: %w", err)
	}
	if err := h.Run(ctx, Command{Dir: o.Root, Env: []string{"CGO_ENABLED=0", "GOOS=linux", "GOARCH=" + arch},
		Args: []string{"go", "build", "-C", "kind-e2e", "-o", imagesDir + "/", "./cmd/devcluster-echo"}}); err != nil {
		return fmt.Errorf("build the echo image's binary: %w", err)
	}
	archives := []string{filepath.Join(imagesDir, "tailplane-operator.tar"), filepath.Join(imagesDir, "tailplane-proxy.tar"), filepath.Join(imagesDir, "echo.tar")}
	layouts := filepath.Join(o.Root, ".cache", "images")
	if err := LayoutArchive(filepath.Join(layouts, "tailplane-operator"), OperatorRepo, o.Tag, arch, archives[0]); err != nil {
		return err
	}
	if err := LayoutArchive(filepath.Join(layouts, "tailplane-proxy"), ProxyRepo, o.Tag, arch, archives[1]); err != nil {
		return err
	}
	if err := EchoArchive(filepath.Join(imagesDir, "devcluster-echo"), arch, EchoRefs, archives[2]); err != nil {
		return err
	}

	// 2. The cluster.
	kubeconfig := filepath.Join(o.Dir, "kubeconfig")
	fmt.Fprintf(o.Out, "e2e:kind: creating kind cluster %q (kubeconfig %s)\n", o.Name, kubeconfig)
	if err := k.Create(o.Name, ClusterConfig(o.Name), kubeconfig); err != nil {
		// kind deletes a cluster it failed to create.
		return fmt.Errorf("kind create cluster %s: %w", o.Name, err)
	}
	defer func() {
		if o.Keep {
			fmt.Fprintf(o.Out, "e2e:kind: KEEP=1: kind cluster %q is still running (kubectl --kubeconfig %s); go tool task e2e:kind:down deletes it\n", o.Name, kubeconfig)
			return
		}
		fmt.Fprintf(o.Out, "e2e:kind: deleting kind cluster %q\n", o.Name)
		if derr := k.Delete(o.Name, kubeconfig); derr != nil {
			err = errors.Join(err, fmt.Errorf("kind delete cluster %s: %w", o.Name, derr))
		}
	}()

	// 3. The tailnet, where pods reach this machine: the kind network's
	// gateway, an address of this machine with Docker Engine on Linux.
	gw, err := h.NetworkGateway(ctx, o.Network)
	if err != nil {
		return fmt.Errorf("the kind network's gateway: %w", err)
	}
	if err := checkLocal(h, gw, o.Network); err != nil {
		return err
	}
	// Proxies fetch certificates from the tailnet's ACME server (Pebble)
	// over HTTPS and trust only the public roots and what SSL_CERT_FILE
	// names: Pebble's certificate is signed by the cluster's CA, which
	// every pod has as its service account's ca.crt.
	issuer, err := clusterCA(k, o)
	if err != nil {
		return err
	}
	stopTailnet, err := h.Start(ctx, Command{Dir: o.Root, Log: filepath.Join(o.Dir, "tailnet.log"),
		Args: []string{filepath.Join(o.Assets, "devcluster"), "tailnet", "--dir", o.Dir, "--host", gw.String(),
			"--acme-issuer-cert", issuer[0], "--acme-issuer-key", issuer[1]}}, "ready ")
	if err != nil {
		return fmt.Errorf("devcluster tailnet (log: %s): %w", filepath.Join(o.Dir, "tailnet.log"), err)
	}
	defer func() {
		if serr := stopTailnet(); serr != nil {
			err = errors.Join(err, fmt.Errorf("stop devcluster tailnet: %w", serr))
		}
	}()

	// 4. The images into the node.
	for _, a := range archives {
		fmt.Fprintf(o.Out, "e2e:kind: loading %s\n", filepath.Base(a))
		if err := k.LoadImageArchive(o.Name, a); err != nil {
			return fmt.Errorf("kind load image-archive %s: %w", a, err)
		}
	}

	// 5. The chart, as go tool task dev installs it, with the loaded tags.
	values, err := Values(o.Tag)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(o.Dir, "values.yaml"), values, 0o644); err != nil {
		return err
	}
	if err := h.Run(ctx, Command{Dir: o.Root, Args: []string{"go", "run", "./deploy/manifests/devinstall", "--dir", o.Dir}}); err != nil {
		return fmt.Errorf("install the Helm chart: %w", err)
	}

	// 6. The suite, against this cluster and tailnet.
	if err := h.Run(ctx, SuiteCommand(o)); err != nil {
		return fmt.Errorf("the operator suite on kind: %w", err)
	}
	fmt.Fprintln(o.Out, "e2e:kind: the operator suite passed on kind")
	return nil
}

// clusterCA copies the kind cluster's CA (kubeadm's, in the node's
// /etc/kubernetes/pki) to D/pki and returns the certificate's and the key's
// files.
func clusterCA(k Kind, o Options) ([2]string, error) {
	files := [2]string{filepath.Join(o.Dir, "pki", "cluster-ca.crt"), filepath.Join(o.Dir, "pki", "cluster-ca.key")}
	if err := os.MkdirAll(filepath.Dir(files[0]), 0o700); err != nil {
		return files, err
	}
	for i, src := range []string{"/etc/kubernetes/pki/ca.crt", "/etc/kubernetes/pki/ca.key"} {
		b, err := k.ReadNodeFile(o.Name, src)
		if err != nil {
			return files, fmt.Errorf("the cluster's CA: %s: %w", src, err)
		}
		if err := os.WriteFile(files[i], b, 0o600); err != nil {
			return files, err
		}
	}
	return files, nil
}

// SuiteCommand is the operator suite's run against e2e:kind's cluster.
func SuiteCommand(o Options) Command {
	return Command{Dir: o.Root,
		Env:  []string{"TAILPLANE_E2E_DIR=" + o.Dir, "TAILPLANE_TEST_ASSETS=" + o.Assets},
		Args: append([]string{"go", "test", "-C", "kind-e2e", "-count=1", "-timeout=60m", "./operator"}, o.SuiteArgs...)}
}

// Values are the chart values e2e:kind adds to devinstall's (it reads
// D/values.yaml): the images loaded into the node, never pulled.
func Values(tag string) ([]byte, error) {
	b, err := yaml.Marshal(map[string]any{
		"operatorConfig": map[string]any{"image": map[string]any{"repository": OperatorRepo, "tag": tag, "pullPolicy": "IfNotPresent"}},
		"proxyConfig":    map[string]any{"image": map[string]any{"repository": ProxyRepo, "tag": tag}},
	})
	if err != nil {
		return nil, err
	}
	return append([]byte("# Written by go tool task e2e:kind: the images it loaded into the kind node.\n"), b...), nil
}

// checkLocal fails unless gw is an address of this machine: with Docker
// Desktop or a remote engine the gateway is inside a VM or elsewhere, and
// devcluster's tailnet cannot listen there.
func checkLocal(h Host, gw netip.Addr, network string) error {
	addrs, err := h.Addrs()
	if err != nil {
		return err
	}
	for _, a := range addrs {
		if a == gw {
			return nil
		}
	}
	return fmt.Errorf("the Docker network %q's gateway %s is not an address of this machine (Docker Desktop, or a remote DOCKER_HOST?): e2e:kind runs devcluster's tailnet here for the kind node's pods to reach at that gateway, which needs Docker Engine on this Linux machine", network, gw)
}

// Down deletes e2e:kind's cluster, stops a tailnet left running and
// removes its folder (go tool task e2e:kind:down).
func Down(ctx context.Context, o Options, h Host, k Kind) error {
	var errs []error
	if _, _, err := h.DockerInfo(ctx); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", noDocker, err))
	} else if exists, err := k.Exists(o.Name); err != nil {
		errs = append(errs, err)
	} else if exists {
		fmt.Fprintf(o.Out, "e2e:kind: deleting kind cluster %q\n", o.Name)
		errs = append(errs, k.Delete(o.Name, filepath.Join(o.Dir, "kubeconfig")))
	}
	if _, err := os.Stat(o.Dir); err == nil {
		errs = append(errs, h.Run(ctx, Command{Dir: o.Root, Args: []string{filepath.Join(o.Assets, "devcluster"), "down", "--dir", o.Dir}}))
		errs = append(errs, os.RemoveAll(o.Dir))
	}
	return errors.Join(errs...)
}
