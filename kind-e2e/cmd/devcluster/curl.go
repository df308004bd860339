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
	"tailscale.com/envknob"
	"tailscale.com/ipn/store/mem"
	"tailscale.com/logtail"
	"tailscale.com/net/netns"
	"tailscale.com/tailcfg"
	"tailscale.com/tsnet"

	"github.com/tailplane/tailplane/kind-e2e/internal/headscale"
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

// curlOptions are devcluster curl's flags: a small subset of curl's.
type curlOptions struct {
	dir, method, data string
	caCerts           headerFlags // --cacert files, trusted besides D/ca.pem
	headers           headerFlags
	tags              headerFlags // --tag: the node's tags
	include, noFollow bool
	verbose           bool
	tailnet           int
	timeout           time.Duration
	url               *url.URL
}

// headerFlags collects a repeated flag: -H "Name: value", --cacert FILE.
type headerFlags []string

func (h *headerFlags) String() string     { return strings.Join(*h, ", ") }
func (h *headerFlags) Set(v string) error { *h = append(*h, v); return nil }

// parseCurl reads devcluster curl's arguments.
func parseCurl(args []string) (*curlOptions, error) {
	o := &curlOptions{}
	fs := flag.NewFlagSet("curl", flag.ContinueOnError)
	fs.StringVar(&o.dir, "dir", envOr("DEVCLUSTER_DIR", ".devcluster"), "cluster directory")
	fs.DurationVar(&o.timeout, "timeout", 60*time.Second, "give up after this long")
	fs.StringVar(&o.method, "X", "", "request method (default GET, or POST with -d)")
	fs.StringVar(&o.data, "d", "", "request body (sets the method to POST unless -X is given)")
	fs.Var(&o.headers, "H", `request header "Name: value" (repeatable)`)
	fs.Var(&o.caCerts, "cacert", "PEM file of a CA to trust besides D/ca.pem (repeatable): an Ingress's own certificate (tls.secretName)")
	fs.BoolVar(&o.include, "i", false, "print the response status line and headers before the body")
	fs.BoolVar(&o.noFollow, "no-follow", false, "do not follow redirects (print the redirect itself)")
	fs.BoolVar(&o.verbose, "v", false, "print the tailnet node's log and the request to stderr")
	fs.Var(&o.tags, "tag", "tag of the tailnet node curl joins as, tag:name (repeatable; default none: the OAuth client's user), for a policy that lets only tagged devices in")
	fs.IntVar(&o.tailnet, "tailnet", 1, "which tailnet to join: 1, or 2 for the second tailnet of devcluster up --tailnets 2")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if o.tailnet != 1 && o.tailnet != 2 {
		return nil, fmt.Errorf("curl: --tailnet %d: want 1 or 2", o.tailnet)
	}
	if fs.NArg() != 1 {
		return nil, errors.New("curl: want exactly one URL (flags go before it)")
	}
	u, err := url.Parse(fs.Arg(0))
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("curl: bad URL %q (want http:// or https://)", fs.Arg(0))
	}
	o.url = u
	for _, tag := range o.tags {
		if err := tailcfg.CheckTag(tag); err != nil {
			return nil, fmt.Errorf("curl: --tag %q: %w", tag, err)
		}
	}
	for _, h := range o.headers {
		if name, _, ok := strings.Cut(h, ":"); !ok || strings.TrimSpace(name) == "" {
			return nil, fmt.Errorf(`curl: bad header %q (want "Name: value")`, h)
		}
	}
	return o, nil
}

// request builds the HTTP request o describes.
func (o *curlOptions) request(ctx context.Context) (*http.Request, error) {
	method := o.method
	if method == "" {
		method = http.MethodGet
		if o.data != "" {
			method = http.MethodPost
		}
	}
	var body io.Reader
	if o.data != "" {
		body = strings.NewReader(o.data)
	}
	req, err := http.NewRequestWithContext(ctx, method, o.url.String(), body)
	if err != nil {
		return nil, err
	}
	if o.data != "" {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for _, h := range o.headers {
		name, value, _ := strings.Cut(h, ":")
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		if strings.EqualFold(name, "Host") {
			req.Host = value
			continue
		}
		req.Header.Add(name, value)
	}
	return req, nil
}

// runCurl joins the tailnet as an ephemeral node (with a key minted through
// the tailnet's API), sends the request through it, trusting only
// D/ca.pem for HTTPS, and prints the response. It is quiet unless -v.
func runCurl(args []string) error {
	o, err := parseCurl(args)
	if err != nil {
		return err
	}
	env, err := readEnvFile(filepath.Join(o.dir, "tailnet.env"))
	if err != nil {
		return fmt.Errorf("curl: %w (is devcluster up running for %s?)", err, o.dir)
	}
	if o.tailnet == 2 {
		if env, err = secondTailnet(env); err != nil {
			return fmt.Errorf("curl: %w", err)
		}
	}
	roots := x509.NewCertPool()
	pem, err := os.ReadFile(env["TS_CA_FILE"])
	if err != nil || !roots.AppendCertsFromPEM(pem) {
		return fmt.Errorf("curl: cannot read the tailnet CA %q: %v", env["TS_CA_FILE"], err)
	}
	for _, f := range o.caCerts {
		if pem, err := os.ReadFile(f); err != nil || !roots.AppendCertsFromPEM(pem) {
			return fmt.Errorf("curl: --cacert %s: no PEM certificate there (%v)", f, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()

	authKey, err := mintKey(ctx, env, "devcluster curl", true, o.tags)
	if err != nil {
		return err
	}
	netns.SetEnabled(false)
	// Off loopback (the real node) Tailscale's Noise client may dial the
	// control server over TLS on port 443 (tailnet.Config.TLSAddr), with a
	// certificate of devcluster's local CA.
	if os.Getenv("SSL_CERT_FILE") == "" && env["TS_ACME_CA_FILE"] != "" && !strings.Contains(env["TS_CONTROL_URL"], "//127.0.0.1:") {
		_ = os.Setenv("SSL_CERT_FILE", env["TS_ACME_CA_FILE"])
	}
	// No log upload: it is Tailscale's service, not devcluster's, and its
	// DNS fallback dials Tailscale's public DERP servers (and logs that it
	// cannot verify them, offline).
	envknob.SetNoLogsNoSupport()
	logtail.Disable()
	stateDir, err := os.MkdirTemp("", "devcluster-curl-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(stateDir)
	logf := func(string, ...any) {}
	if o.verbose {
		logf = func(format string, args ...any) { fmt.Fprintf(os.Stderr, "tsnet: "+format+"\n", args...) }
	}
	node := &tsnet.Server{
		ControlURL: env["TS_CONTROL_URL"], Hostname: "devcluster-curl", AuthKey: authKey,
		Ephemeral: true, Store: new(mem.Store), Dir: stateDir, Logf: logf, UserLogf: logf,
	}
	defer node.Close()
	if _, err := node.Up(ctx); err != nil {
		return fmt.Errorf("curl: join the tailnet: %w", err)
	}
	defer leave(node)
	if lc, err := node.LocalClient(); err == nil {
		if err := checkPolicy(ctx, lc, env, o.url, o.tags); err != nil {
			return err
		}
	}
	client := &http.Client{Transport: &http.Transport{
		DialContext:     node.Dial,
		TLSClientConfig: &tls.Config{RootCAs: roots},
	}}
	if o.noFollow {
		client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	}
	req, err := o.request(ctx)
	if err != nil {
		return err
	}
	if o.verbose {
		fmt.Fprintf(os.Stderr, "> %s %s\n", req.Method, req.URL)
		for k, v := range req.Header {
			fmt.Fprintf(os.Stderr, "> %s: %s\n", k, strings.Join(v, ", "))
		}
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("curl: %w", err)
	}
	defer resp.Body.Close()
	if o.include {
		fmt.Printf("%s %s\r\n", resp.Proto, resp.Status)
		if err := resp.Header.Write(os.Stdout); err != nil {
			return err
		}
		fmt.Print("\r\n")
	}
	if _, err := io.Copy(os.Stdout, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode >= 400 {
		return fmt.Errorf("curl: %s", resp.Status)
	}
	return nil
}

// leave logs the ephemeral node out, so that it leaves the device list now
// (devcluster's control, Tailscale and Headscale delete an ephemeral device
// that logs out) instead of staying listed, offline, after every request.
func leave(node *tsnet.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if lc, err := node.LocalClient(); err == nil {
		_ = lc.Logout(ctx)
	}
}

// mintKey creates a pre-authorized auth key through the tailnet's API with
// the official client, as the operator does; on Headscale (TS_CONTROL
// headscale), a pre-auth key through Headscale's API.
func mintKey(ctx context.Context, env map[string]string, desc string, ephemeral bool, tags []string) (string, error) {
	if env["TS_CONTROL"] == controlHeadscale {
		k, err := headscale.MintKey(ctx, env["HEADSCALE_URL"], env["HEADSCALE_API_KEY"], ephemeral, tags, 10*time.Minute)
		if err != nil {
			return "", fmt.Errorf("mint auth key for %s: %w", desc, err)
		}
		return k, nil
	}
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

// secondTailnet is env with the second tailnet's OAuth client, MagicDNS
// domain and URLs (SECOND_TS_*; devcluster writes the first's URLs there,
// since one control server serves both) as its TS_* values.
func secondTailnet(env map[string]string) (map[string]string, error) {
	if env["SECOND_TS_CONTROL_URL"] == "" {
		return nil, errors.New("this cluster runs one tailnet (no SECOND_TS_CONTROL_URL in tailnet.env): start it with devcluster up --tailnets 2")
	}
	out := map[string]string{}
	for k, v := range env {
		out[k] = v
	}
	for _, k := range []string{"TS_CONTROL_URL", "TS_API_CLIENT_ID", "TS_API_CLIENT_SECRET", "TS_MAGICDNS_DOMAIN"} {
		out[k] = env["SECOND_"+k]
	}
	out["TS_API_URL"] = env["SECOND_TS_API_URL"]
	if out["TS_API_URL"] == "" { // written by earlier releases without it
		out["TS_API_URL"] = env["SECOND_TS_CONTROL_URL"]
	}
	return out, nil
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
