package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// joinOptions are devcluster join's flags.
type joinOptions struct {
	dir, tailscaled, tailscale, proxy, hostname, tun string
	timeout                                          time.Duration
}

func parseJoin(args []string) (*joinOptions, error) {
	o := &joinOptions{}
	fs := flag.NewFlagSet("join", flag.ContinueOnError)
	fs.StringVar(&o.dir, "dir", envOr("DEVCLUSTER_DIR", ".devcluster"), "cluster directory")
	fs.StringVar(&o.tailscaled, "tailscaled", "", "tailscaled binary (go tool task dev:join builds it from the pinned tailscale.com)")
	fs.StringVar(&o.tailscale, "tailscale", "", "tailscale CLI binary")
	fs.StringVar(&o.proxy, "proxy", "127.0.0.1:1055", "where the SOCKS5 and HTTP proxy into the tailnet listens")
	fs.StringVar(&o.hostname, "hostname", "devcluster-join", "the node's tailnet hostname")
	fs.StringVar(&o.tun, "tun", "", "join with kernel networking on a TUN device of this name (as root), so that this host's own sockets reach tailnet addresses, instead of a userspace tailscaled and its proxy")
	fs.DurationVar(&o.timeout, "timeout", 2*time.Minute, "give up joining after this long")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("join: unexpected arguments %q", fs.Args())
	}
	if o.tailscaled == "" || o.tailscale == "" {
		return nil, errors.New("join: --tailscaled and --tailscale are required (go tool task dev:join builds and passes them)")
	}
	return o, nil
}

// joinState is where the joined node keeps its state and socket, so that it
// comes back as the same device next time.
func (o *joinOptions) joinState() string { return filepath.Join(o.dir, "join") }

func (o *joinOptions) socket() string { return filepath.Join(o.joinState(), "tailscaled.sock") }

// daemonArgs are tailscaled's arguments: userspace networking (no TUN, no
// privileges), with one listener serving both SOCKS5 and HTTP CONNECT.
// With --tun, kernel networking on that TUN device instead: routes to the
// tailnet's addresses for every process of the host, and no proxy.
func (o *joinOptions) daemonArgs() []string {
	common := []string{"--statedir=" + o.joinState(), "--socket=" + o.socket(), "--port=0", "--no-logs-no-support"}
	if o.tun != "" {
		return append([]string{"--tun=" + o.tun}, common...)
	}
	return append(append([]string{"--tun=userspace-networking"}, common...),
		"--socks5-server="+o.proxy, "--outbound-http-proxy-listen="+o.proxy)
}

// upArgs are `tailscale up`'s arguments against devcluster's tailnet.
func (o *joinOptions) upArgs(controlURL, authKey string) []string {
	args := []string{"--socket=" + o.socket(), "up", "--login-server=" + controlURL, "--hostname=" + o.hostname,
		"--accept-routes", "--accept-dns=false", "--reset"}
	if o.tun != "" {
		// The host's firewall belongs to the node and its kube-proxy:
		// tailscaled adds routes only.
		args = append(args, "--netfilter-mode=off")
	}
	if authKey != "" {
		args = append(args, "--auth-key="+authKey)
	}
	return args
}

// runJoin runs a userspace tailscaled and the tailscale CLI on devcluster's
// tailnet, as a user's machine would join it, and serves a SOCKS5 and HTTP
// proxy into the tailnet until Ctrl-C.
func runJoin(args []string) error {
	o, err := parseJoin(args)
	if err != nil {
		return err
	}
	env, err := readEnvFile(filepath.Join(o.dir, "tailnet.env"))
	if err != nil {
		return fmt.Errorf("join: %w (is devcluster up running for %s?)", err, o.dir)
	}
	if err := os.MkdirAll(o.joinState(), 0o700); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logPath := filepath.Join(o.joinState(), "tailscaled.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logFile.Close()
	daemon := exec.Command(o.tailscaled, o.daemonArgs()...)
	daemon.Stdout, daemon.Stderr = logFile, logFile
	daemon.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := daemon.Start(); err != nil {
		return fmt.Errorf("join: start tailscaled: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- daemon.Wait() }()
	defer func() {
		_ = daemon.Process.Signal(syscall.SIGTERM)
		<-exited
	}()

	upCtx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	// A node with saved state needs no key; a new one gets a fresh one.
	key := ""
	if _, err := os.Stat(filepath.Join(o.joinState(), "tailscaled.state")); err != nil {
		if key, err = mintKey(upCtx, env, "devcluster join", false, nil); err != nil {
			return fmt.Errorf("join: %w", err)
		}
	}
	if err := o.up(upCtx, env["TS_CONTROL_URL"], key); err != nil {
		return fmt.Errorf("join: %w (tailscaled's log: %s)", err, logPath)
	}
	cli := fmt.Sprintf("%s --socket=%s", o.tailscale, o.socket())
	domain := env["TS_MAGICDNS_DOMAIN"]
	if o.tun != "" {
		fmt.Printf(`joined the tailnet as %s on TUN device %s; Ctrl-C leaves (the device stays for next time)
  %s status
  curl --cacert %s https://<tailnet IP>/    # this host's sockets reach tailnet addresses (MagicDNS names are not in its resolver)
ready tun=%s
`, o.hostname, o.tun, cli, env["TS_CA_FILE"], o.tun)
	} else {
		fmt.Printf(`joined the tailnet as %s; Ctrl-C leaves (the device stays for next time)
  %s status
  %s ping <device>
  %s set --exit-node=<device>          # route everything through an exit node
  curl --proxy socks5h://%s --cacert %s https://my-app.%s/
  HTTPS_PROXY=http://%s kubectl ...     # or a browser with SOCKS5 proxy %s
ready proxy=%s
`, o.hostname, cli, cli, cli, o.proxy, env["TS_CA_FILE"], domain, o.proxy, o.proxy, o.proxy)
	}
	select {
	case <-ctx.Done():
		return nil
	case err := <-exited:
		exited <- err
		return fmt.Errorf("join: tailscaled exited: %v (log: %s)", err, logPath)
	}
}

// up runs `tailscale up` until tailscaled answers on its socket.
func (o *joinOptions) up(ctx context.Context, controlURL, key string) error {
	var last []byte
	for {
		out, err := exec.CommandContext(ctx, o.tailscale, o.upArgs(controlURL, key)...).CombinedOutput()
		if err == nil {
			return nil
		}
		last = out
		if !strings.Contains(string(out), "tailscaled") && !strings.Contains(string(out), "connection refused") {
			return fmt.Errorf("tailscale up: %v: %s", err, strings.TrimSpace(string(out)))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("tailscale up: tailscaled did not answer: %s", strings.TrimSpace(string(last)))
		case <-time.After(200 * time.Millisecond):
		}
	}
}
