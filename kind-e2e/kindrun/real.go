package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"

	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	"sigs.k8s.io/kind/pkg/cluster"
	"sigs.k8s.io/kind/pkg/cluster/nodeutils"
	kindcmd "sigs.k8s.io/kind/pkg/cmd"
)

// dockerHost is Host on this machine: the docker CLI (which kind drives
// too) and os/exec.
type dockerHost struct{}

// docker runs the docker CLI and returns its standard output; an error
// carries its standard error.
func docker(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "docker", args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return "", errors.New("the docker command is not installed (kind drives the engine through it)")
		}
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return "", fmt.Errorf("`docker %s` failed: %s", strings.Join(args, " "), msg)
	}
	return strings.TrimSpace(stdout.String()), nil
}

func (dockerHost) DockerInfo(ctx context.Context) (string, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := docker(ctx, "info", "--format", "{{.ServerVersion}} {{.Architecture}}")
	if err != nil {
		return "", "", err
	}
	f := strings.Fields(out)
	if len(f) != 2 {
		// docker info prints a partial answer, and exits 0, when only the
		// client answers.
		return "", "", fmt.Errorf("`docker info` reports no engine: %q", out)
	}
	return f[0], f[1], nil
}

func (dockerHost) NetworkGateway(ctx context.Context, network string) (netip.Addr, error) {
	out, err := docker(ctx, "network", "inspect", network, "--format", "{{range .IPAM.Config}}{{.Gateway}} {{end}}")
	if err != nil {
		return netip.Addr{}, err
	}
	return ipv4Gateway(network, out)
}

// ipv4Gateway picks the IPv4 address out of a network's gateways (kind's
// network has an IPv6 one too).
func ipv4Gateway(network, out string) (netip.Addr, error) {
	for _, f := range strings.Fields(out) {
		if a, err := netip.ParseAddr(f); err == nil && a.Is4() {
			return a, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("docker network %s has no IPv4 gateway (%q)", network, out)
}

func (dockerHost) Addrs() ([]netip.Addr, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	var out []netip.Addr
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			out = append(out, p.Addr())
		}
	}
	return out, nil
}

func command(ctx context.Context, c Command) *exec.Cmd {
	cmd := exec.CommandContext(ctx, c.Args[0], c.Args[1:]...)
	cmd.Dir = c.Dir
	cmd.Env = append(os.Environ(), c.Env...)
	return cmd
}

func (dockerHost) Run(ctx context.Context, c Command) error {
	cmd := command(ctx, c)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	// SIGINT, as Ctrl-C, rather than SIGKILL when ctx ends: go test and
	// task clean up after themselves.
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = time.Minute
	return cmd.Run()
}

func (dockerHost) Start(ctx context.Context, c Command, ready string) (func() error, error) {
	log, err := os.OpenFile(c.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	// Not CommandContext: the caller stops it, after ctx ends too.
	cmd := exec.Command(c.Args[0], c.Args[1:]...)
	cmd.Dir, cmd.Env, cmd.Stderr = c.Dir, append(os.Environ(), c.Env...), log
	// Its own process group: the terminal's Ctrl-C reaches e2e:kind,
	// which stops it last.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		log.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, err
	}
	readyCh, scanned, exited := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(stdout)
		once := false
		for sc.Scan() {
			fmt.Fprintln(log, sc.Text())
			if !once && strings.HasPrefix(sc.Text(), ready) {
				once = true
				close(readyCh)
			}
		}
	}()
	// Wait closes the pipe: only once everything was read from it.
	go func() { <-scanned; exited <- cmd.Wait(); log.Close() }()
	stop := func() error {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case err := <-exited:
			return err
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			return fmt.Errorf("%s did not stop within 30 s of SIGINT; killed", c.Args[0])
		}
	}
	select {
	case <-readyCh:
		return stop, nil
	case err := <-exited:
		return nil, fmt.Errorf("exited before it was ready: %v", err)
	case <-time.After(2 * time.Minute):
		_ = stop()
		return nil, errors.New("not ready within 2 minutes")
	case <-ctx.Done():
		_ = stop()
		return nil, ctx.Err()
	}
}

// kindLib is Kind through kind's library, with the Docker provider.
type kindLib struct{ p *cluster.Provider }

func newKindLib() kindLib {
	return kindLib{p: cluster.NewProvider(cluster.ProviderWithLogger(kindcmd.NewLogger()), cluster.ProviderWithDocker())}
}

func (k kindLib) Exists(name string) (bool, error) {
	names, err := k.p.List()
	return slices.Contains(names, name), err
}

func (k kindLib) Create(name string, cfg *v1alpha4.Cluster, kubeconfig string) error {
	return k.p.Create(name, cluster.CreateWithV1Alpha4Config(cfg), cluster.CreateWithKubeconfigPath(kubeconfig),
		cluster.CreateWithWaitForReady(3*time.Minute), cluster.CreateWithDisplayUsage(false), cluster.CreateWithDisplaySalutation(false))
}

// LoadImageArchive is `kind load image-archive --name NAME ARCHIVE`: the
// archive into each node's containerd (ctr images import, k8s.io
// namespace), one node at a time.
func (k kindLib) LoadImageArchive(name, archive string) error {
	nodes, err := k.p.ListInternalNodes(name)
	if err != nil {
		return err
	}
	if len(nodes) == 0 {
		return fmt.Errorf("no nodes found for cluster %q", name)
	}
	for _, n := range nodes {
		f, err := os.Open(archive)
		if err != nil {
			return err
		}
		err = nodeutils.LoadImageArchive(n, f)
		f.Close()
		if err != nil {
			return fmt.Errorf("node %s: %w", n, err)
		}
	}
	return nil
}

// ReadNodeFile is `docker exec NAME-control-plane cat PATH`, through
// kind's node.
func (k kindLib) ReadNodeFile(name, path string) ([]byte, error) {
	nodes, err := k.p.ListInternalNodes(name)
	if err != nil {
		return nil, err
	}
	cp, err := nodeutils.BootstrapControlPlaneNode(nodes)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := cp.Command("cat", path).SetStdout(&out).Run(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

func (k kindLib) Delete(name, kubeconfig string) error { return k.p.Delete(name, kubeconfig) }
