// Command devinstall installs Tailplane's operator into a devcluster (the
// local cluster of kind-e2e) the way a user installs it into a real one: the
// Helm chart deploy/chart/tailplane-operator, release tailscale-operator in
// namespace tailscale, through the Helm SDK, with devcluster's tailnet (the
// OAuth client from D/tailnet.env as oauth.clientId/clientSecret, loginServer
// pointing at devcluster's control server), waiting for the operator as
// --wait does; then a default ProxyClass "devcluster" that points proxies at
// devcluster's ACME directory (Pebble), the way a user points proxies at a
// staging directory. Run again, it upgrades the release.
//
// With --up it first starts `devcluster up` and keeps it running until
// Ctrl-C (go tool task dev); without it, it installs into a running one.
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
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/charmbracelet/log"
)

func main() {
	dir := flag.String("dir", ".devcluster", "devcluster folder (kubeconfig, tailnet.env)")
	up := flag.String("up", "", "devcluster binary: start `devcluster up --dir DIR --bin BIN` first and keep it running")
	bin := flag.String("bin", "bin", "folder with tailplane-operator and tailplane-proxy (for --up)")
	flag.Parse()
	logger := log.NewWithOptions(os.Stderr, log.Options{Prefix: "dev"})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *dir, *up, *bin, logger); err != nil {
		logger.Error(err.Error())
		os.Exit(1)
	}
}

func run(ctx context.Context, dir, up, bin string, logger *log.Logger) error {
	var wait func() error
	if up != "" {
		var err error
		if wait, err = startCluster(ctx, up, dir, bin, logger); err != nil {
			return err
		}
	}
	ictx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if err := Install(ictx, dir, logger); err != nil {
		return err
	}
	printTry(dir)
	if wait != nil {
		return wait()
	}
	return nil
}

// startCluster runs `devcluster up` and waits for its ready line; the
// returned func waits for it to end (Ctrl-C stops it).
func startCluster(ctx context.Context, devcluster, dir, bin string, logger *log.Logger) (func() error, error) {
	cmd := exec.Command(devcluster, "up", "--dir", dir, "--bin", bin)
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
			return err
		case <-ctx.Done():
			_ = cmd.Process.Signal(os.Interrupt)
			err := <-exited
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				return nil
			}
			return err
		}
	}, nil
}

func printTry(dir string) {
	abs, _ := filepath.Abs(dir)
	fmt.Printf(`
Tailplane's operator is installed in devcluster (Helm release tailscale-operator,
namespace tailscale; running "go tool task dev" again upgrades it), with the
default ProxyClass %[2]q (devcluster's ACME directory). Try:
  go tool task dev:kubectl -- -n tailscale get pods,statefulsets,proxyclass
  # echo backends, then the seed's exposed Service and Ingress:
  go tool task dev:kubectl -- apply -f kind-e2e/operator/testdata/echo.yaml \
      -f examples/seed/01-service-expose.yaml -f examples/seed/03-ingress.yaml
  go tool task dev:kubectl -- get svc postgres -o jsonpath='{.status.conditions}'
  go tool task dev:kubectl -- get ingress my-app        # ADDRESS: my-app.devcluster.ts.net
  # reach them through the tailnet (a tsnet client with Pebble's root):
  $(go tool task test:assets-dir)/devcluster curl --dir %[1]s https://my-app.devcluster.ts.net/
  $(go tool task test:assets-dir)/devcluster curl --dir %[1]s http://default-postgres.devcluster.ts.net:5432/
Ctrl-C stops the cluster.
`, abs, ProxyClassName)
}
