package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	tsapi "tailscale.com/client/tailscale/v2"
	"tailscale.com/ipn/store/mem"
	"tailscale.com/net/netns"
	"tailscale.com/tsnet"
)

// readEnvFile reads KEY=VALUE lines (comments and blanks skipped).
func readEnvFile(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	env := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if k, v, ok := strings.Cut(line, "="); ok {
			env[k] = v
		}
	}
	return env, sc.Err()
}

// runCurl joins the tailnet as an ephemeral node (with a key minted through
// the tailnet's API), fetches URL through it, trusting only D/ca.pem for
// HTTPS, and prints the body.
func runCurl(args []string) error {
	fs := flag.NewFlagSet("curl", flag.ExitOnError)
	dir := fs.String("dir", envOr("DEVCLUSTER_DIR", ".devcluster"), "cluster directory")
	timeout := fs.Duration("timeout", 60*time.Second, "give up after this long")
	_ = fs.Parse(args)
	if fs.NArg() != 1 {
		return errors.New("curl: want exactly one URL")
	}
	target, err := url.Parse(fs.Arg(0))
	if err != nil || target.Host == "" {
		return fmt.Errorf("curl: bad URL %q", fs.Arg(0))
	}
	env, err := readEnvFile(filepath.Join(*dir, "tailnet.env"))
	if err != nil {
		return fmt.Errorf("curl: %w (is devcluster up running for %s?)", err, *dir)
	}
	roots := x509.NewCertPool()
	pem, err := os.ReadFile(env["TS_CA_FILE"])
	if err != nil || !roots.AppendCertsFromPEM(pem) {
		return fmt.Errorf("curl: cannot read the tailnet CA %q: %v", env["TS_CA_FILE"], err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()

	authKey, err := mintKey(ctx, env, "devcluster curl", true, nil)
	if err != nil {
		return err
	}
	netns.SetEnabled(false)
	stateDir, err := os.MkdirTemp("", "devcluster-curl-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(stateDir)
	node := &tsnet.Server{
		ControlURL: env["TS_CONTROL_URL"], Hostname: "devcluster-curl", AuthKey: authKey,
		Ephemeral: true, Store: new(mem.Store), Dir: stateDir, Logf: func(string, ...any) {},
	}
	defer node.Close()
	if _, err := node.Up(ctx); err != nil {
		return fmt.Errorf("curl: join the tailnet: %w", err)
	}
	client := &http.Client{Transport: &http.Transport{
		DialContext:     node.Dial,
		TLSClientConfig: &tls.Config{RootCAs: roots},
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target.String(), nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("curl: %w", err)
	}
	defer resp.Body.Close()
	if _, err := io.Copy(os.Stdout, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode >= 400 {
		return fmt.Errorf("curl: %s", resp.Status)
	}
	return nil
}

// mintKey creates a pre-authorized auth key through the tailnet's API with
// the official client, as the operator does.
func mintKey(ctx context.Context, env map[string]string, desc string, ephemeral bool, tags []string) (string, error) {
	base, err := url.Parse(env["TS_API_URL"])
	if err != nil {
		return "", fmt.Errorf("TS_API_URL: %w", err)
	}
	api := &tsapi.Client{BaseURL: base, Tailnet: "-", Auth: &tsapi.OAuth{ClientID: env["TS_API_CLIENT_ID"], ClientSecret: env["TS_API_CLIENT_SECRET"]}}
	var req tsapi.CreateKeyRequest
	req.Description = desc
	req.ExpirySeconds = 600
	req.Capabilities.Devices.Create.Ephemeral = ephemeral
	req.Capabilities.Devices.Create.Preauthorized = true
	req.Capabilities.Devices.Create.Tags = tags
	k, err := api.Keys().CreateAuthKey(ctx, req)
	if err != nil {
		return "", fmt.Errorf("mint auth key: %w", err)
	}
	return k.Key, nil
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
