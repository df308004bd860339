package official

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/net/proxy"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// ReadTailnetEnv reads devcluster's tailnet.env (KEY=VALUE lines).
func ReadTailnetEnv(path string) (TailnetEnv, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("devcluster tailnet settings: %w", err)
	}
	defer f.Close()
	env := TailnetEnv{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			env[k] = v
		}
	}
	return env, sc.Err()
}

// roots trusts the system's roots and every CA file devcluster names: the
// root of the certificates proxies obtain, and its local CA (API, ACME).
func (e TailnetEnv) roots() (*x509.CertPool, error) {
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	for _, k := range []string{"TS_CA_FILE", "TS_ACME_CA_FILE"} {
		if e[k] == "" {
			continue
		}
		pem, err := os.ReadFile(e[k])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		pool.AppendCertsFromPEM(pem)
	}
	return pool, nil
}

// TailnetClient returns an HTTP client into the tailnet through a `devcluster
// join` SOCKS5 proxy at socksAddr (names resolve on the tailnet's side), that
// trusts the certificates proxies obtain from devcluster's ACME server.
// keepAlive false gives every request its own connection (a probe measures
// a fresh connection, as a new client would).
// dials, when not nil, counts the connections the client opens (a load
// with keep-alive should open one per worker).
func (e TailnetEnv) TailnetClient(socksAddr string, keepAlive bool, dials *atomic.Int64) (*http.Client, error) {
	roots, err := e.roots()
	if err != nil {
		return nil, err
	}
	d, err := proxy.SOCKS5("tcp", socksAddr, nil, proxy.Direct)
	if err != nil {
		return nil, fmt.Errorf("SOCKS5 %s: %w", socksAddr, err)
	}
	cd, ok := d.(proxy.ContextDialer)
	if !ok {
		return nil, errors.New("SOCKS5 dialer without DialContext")
	}
	dial := cd.DialContext
	if dials != nil {
		dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			return cd.DialContext(ctx, network, addr)
		}
	}
	tr := &http.Transport{
		DialContext:         dial,
		TLSClientConfig:     &tls.Config{RootCAs: roots},
		DisableKeepAlives:   !keepAlive,
		MaxIdleConnsPerHost: 64,
		ForceAttemptHTTP2:   false,
	}
	return &http.Client{
		Transport: tr,
		Timeout:   10 * time.Second,
		// A redirect (http-redirect's 301) is a result, not something to follow.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}, nil
}

// Device is one device of the tailnet API's device list.
type Device struct {
	ID        string   `json:"id"`
	Name      string   `json:"name"`
	Hostname  string   `json:"hostname"`
	Tags      []string `json:"tags"`
	Addresses []string `json:"addresses"`
}

// apiClient is an HTTP client of the tailnet API (devcluster's is
// Tailscale's) with the OAuth client of tailnet.env, and the API's base URL.
func (e TailnetEnv) apiClient(ctx context.Context) (*http.Client, string, error) {
	roots, err := e.roots()
	if err != nil {
		return nil, "", err
	}
	base := strings.TrimRight(e["TS_API_URL"], "/")
	if base == "" {
		return nil, "", errors.New("tailnet.env has no TS_API_URL")
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	cc := clientcredentials.Config{ClientID: e["TS_API_CLIENT_ID"], ClientSecret: e["TS_API_CLIENT_SECRET"], TokenURL: base + "/api/v2/oauth/token"}
	// The token request and the API calls go through hc (devcluster's CA).
	return cc.Client(context.WithValue(ctx, oauth2.HTTPClient, hc)), base, nil
}

// Devices lists the tailnet's devices through its API.
func (e TailnetEnv) Devices(ctx context.Context) ([]Device, error) {
	client, base, err := e.apiClient(ctx)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v2/tailnet/-/devices", nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("list devices: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("list devices: %s", resp.Status)
	}
	var out struct {
		Devices []Device `json:"devices"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, fmt.Errorf("list devices: %w", err)
	}
	return out.Devices, nil
}

// DeleteDevice removes a device from the tailnet through its API.
func (e TailnetEnv) DeleteDevice(ctx context.Context, id string) error {
	client, base, err := e.apiClient(ctx)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, base+"/api/v2/device/"+id, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("delete device %s: %w", id, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusNotFound {
		return fmt.Errorf("delete device %s: %s", id, resp.Status)
	}
	return nil
}
