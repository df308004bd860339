// Command devinstall installs Tailplane's operator into a devcluster (the
// local cluster of kind-e2e) the way a user installs it into a real one: the
// Helm chart deploy/chart/tailplane-operator, release tailscale-operator in
// namespace tailscale, through the Helm SDK, with devcluster's tailnet (the
// OAuth client from D/tailnet.env as oauth.clientId/clientSecret, loginServer
// pointing at devcluster's control server, and devcluster's ACME directory
// (Pebble) for every device as proxyConfig.acmeDirectoryURL and
// acmeCAFile, the way a user points a release at a staging directory),
// waiting for the operator as --wait does; then an empty default ProxyClass
// "devcluster". Run again, it upgrades the release.
//
// With --up it first starts `devcluster up` and keeps it running until
// Ctrl-C (go tool task dev); without it, it installs into a running one.
// Values in the folder's values.yaml, when there is one, are added to its
// own (go tool task e2e:kind writes the image tags there).
// Then it prints what to try.
//
// It imports deploy/chart, client-go and charmbracelet/log.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/charmbracelet/log"
)

func main() {
	logger := log.NewWithOptions(os.Stderr, log.Options{Prefix: "dev"})
	o, err := parseArgs(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		logger.Error(err.Error())
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, logger); err != nil {
		logger.Error(err.Error())
		os.Exit(1)
	}
}

// options are devinstall's flags; UpArgs are the devcluster up options
// given after "--".
type options struct {
	Dir, Up, Bin string
	// PodSecurity is the Pod Security Standard enforced in the operator's
	// namespace (pod-security.kubernetes.io/enforce); "" leaves the
	// namespace unlabelled.
	PodSecurity string
	// WorkloadIdentity installs the operator with the tailnet's workload
	// identity federation client instead of its OAuth client secret.
	WorkloadIdentity bool
	UpArgs           []string
}

func parseArgs(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("devinstall", flag.ContinueOnError)
	fs.StringVar(&o.Dir, "dir", ".devcluster", "devcluster folder (kubeconfig, tailnet.env)")
	fs.StringVar(&o.Up, "up", "", "devcluster binary: start \"devcluster up --dir DIR --bin BIN [options after --]\" first and keep it running")
	fs.StringVar(&o.Bin, "bin", "bin", "folder with tailplane-operator and tailplane-proxy (for --up)")
	fs.StringVar(&o.PodSecurity, "pod-security", "restricted", `Pod Security Standard enforced in the operator's namespace (label pod-security.kubernetes.io/enforce): restricted, baseline, privileged, or "" for no label`)
	fs.BoolVar(&o.WorkloadIdentity, "workload-identity", false, "install with the tailnet's workload identity federation client (oauth.clientId and oauth.audience from tailnet.env's TS_API_FEDERATED_*): the operator exchanges its projected ServiceAccount token for API tokens, and no client secret is stored")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: devinstall [--dir D] [--up DEVCLUSTER [--bin B]] [-- devcluster up options, e.g. --image 'GLOB=BINARY']")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch o.PodSecurity {
	case "", "restricted", "baseline", "privileged":
	default:
		return o, fmt.Errorf("--pod-security %q: want restricted, baseline, privileged or \"\"", o.PodSecurity)
	}
	o.UpArgs = fs.Args()
	if len(o.UpArgs) > 0 && o.Up == "" {
		return o, fmt.Errorf("devcluster options %q need --up (they are passed to devcluster up)", o.UpArgs)
	}
	for _, a := range o.UpArgs {
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "-") && (name == "dir" || name == "bin") {
			return o, fmt.Errorf("devcluster option %q is set by devinstall: use --%s (DEV_DIR for go tool task dev) instead", a, name)
		}
	}
	return o, nil
}

// upCommand is the devcluster up command line for o.
func upCommand(o options) []string {
	return append([]string{"up", "--dir", o.Dir, "--bin", o.Bin}, o.UpArgs...)
}

// run starts the cluster (with --up), installs, prints what to try and
// waits. A signal (Ctrl-C, the documented way to stop `go tool task dev`)
// is a normal end: the cluster is stopped and run returns nil.
func run(ctx context.Context, o options, logger *log.Logger) error {
	var wait func() error
	if o.Up != "" {
		var err error
		if wait, err = startCluster(ctx, o.Up, upCommand(o), logger); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
	ictx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if err := Install(ictx, o.Dir, o.PodSecurity, o.WorkloadIdentity, logger); err != nil {
		if ctx.Err() != nil && wait != nil {
			return wait()
		}
		return err
	}
	fmt.Print(tryText(o.Dir))
	if wait != nil {
		return wait()
	}
	return nil
}

// startCluster runs devcluster with args (up ...) and waits for its ready
// line; the returned func waits for it to end. When ctx ends (Ctrl-C), it
// interrupts devcluster, which stops everything it started, and reports a
// clean stop as nil; so is devcluster's own clean exit (devcluster down).
func startCluster(ctx context.Context, devcluster string, args []string, logger *log.Logger) (func() error, error) {
	cmd := exec.Command(devcluster, args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start devcluster: %w", err)
	}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			fmt.Println(sc.Text())
			if strings.HasPrefix(sc.Text(), "ready ") {
				close(ready)
			}
		}
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case <-ready:
	case err := <-exited:
		return nil, fmt.Errorf("devcluster up exited: %v", err)
	case <-ctx.Done():
		_ = cmd.Process.Signal(os.Interrupt)
		<-exited
		return nil, ctx.Err()
	}
	logger.Info("devcluster is up")
	return func() error {
		select {
		case err := <-exited:
			if ctx.Err() != nil {
				return nil // it had the same Ctrl-C and stopped first
			}
			if err == nil {
				// devcluster down (go tool task dev:down) stopped it.
				logger.Info("devcluster stopped")
				return nil
			}
			return fmt.Errorf("devcluster up exited: %w", err)
		case <-ctx.Done():
			_ = cmd.Process.Signal(os.Interrupt)
			if err := <-exited; err != nil {
				return fmt.Errorf("devcluster up did not stop cleanly: %w", err)
			}
			return nil
		}
	}, nil
}
