package official

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"tailscale.com/ipn"
	"tailscale.com/ipn/store/mem"
	"tailscale.com/net/netns"
	"tailscale.com/tsnet"
)

// A Connector's subnet route cannot be measured through `devcluster join`'s
// proxy: the real node's pod subnet is the host's own, and the proxy dials
// an address without an approved route from the host directly. The
// Connector's clients are in-process tailnet nodes (tsnet) instead, which
// reach a pod IP only through an approved route.

// RoutesClient joins the tailnet in-process as an ephemeral node named
// hostname and returns an HTTP client (a fresh connection per request)
// whose connections go through the tailnet only (to IP addresses a peer
// routes), and a function that leaves.
func (e TailnetEnv) RoutesClient(ctx context.Context, dir, hostname string) (*http.Client, func(), error) {
	key, err := e.createKey(ctx, hostname)
	if err != nil {
		return nil, nil, err
	}
	roots, err := e.roots()
	if err != nil {
		return nil, nil, err
	}
	netns.SetEnabled(false) // devcluster's tailnet is on loopback
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, err
	}
	node := &tsnet.Server{ControlURL: e["TS_CONTROL_URL"], Hostname: hostname, AuthKey: key, Ephemeral: true,
		Store: new(mem.Store), Dir: dir, Logf: func(string, ...any) {}, UserLogf: func(string, ...any) {}}
	if _, err := node.Up(ctx); err != nil {
		_ = node.Close()
		return nil, nil, fmt.Errorf("join the tailnet in-process as %s: %w", hostname, err)
	}
	lc, err := node.LocalClient()
	if err != nil {
		_ = node.Close()
		return nil, nil, err
	}
	// Subnet routes are used only when accepted (tailscale up
	// --accept-routes), which is off by default on Linux: without it tsnet
	// would dial a routed address from the host.
	if _, err := lc.EditPrefs(ctx, &ipn.MaskedPrefs{Prefs: ipn.Prefs{RouteAll: true}, RouteAllSet: true}); err != nil {
		_ = node.Close()
		return nil, nil, fmt.Errorf("accept the tailnet's routes: %w", err)
	}
	// tsnet dials an address no peer routes from the host: refused here,
	// as a client elsewhere could not reach it.
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		ap, err := netip.ParseAddrPort(addr)
		if err != nil {
			return nil, fmt.Errorf("dial %s: an IP address and port only: %w", addr, err)
		}
		st, err := lc.Status(ctx)
		if err != nil {
			return nil, err
		}
		for _, p := range st.Peer {
			if p.AllowedIPs != nil && slices.ContainsFunc(p.AllowedIPs.AsSlice(), func(r netip.Prefix) bool { return r.Contains(ap.Addr()) }) {
				return node.Dial(ctx, network, addr)
			}
		}
		return nil, fmt.Errorf("dial %s: no tailnet peer routes %s", addr, ap.Addr())
	}
	client := &http.Client{Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true,
		TLSClientConfig: &tls.Config{RootCAs: roots}}}
	return client, func() { _ = node.Close() }, nil
}

// createKey mints a preauthorized, ephemeral auth key through the API.
func (e TailnetEnv) createKey(ctx context.Context, description string) (string, error) {
	var req struct {
		Capabilities struct {
			Devices struct {
				Create struct {
					Ephemeral     bool `json:"ephemeral"`
					Preauthorized bool `json:"preauthorized"`
				} `json:"create"`
			} `json:"devices"`
		} `json:"capabilities"`
		ExpirySeconds int    `json:"expirySeconds"`
		Description   string `json:"description"`
	}
	req.Capabilities.Devices.Create.Ephemeral, req.Capabilities.Devices.Create.Preauthorized = true, true
	req.ExpirySeconds, req.Description = 3600, description
	var out struct {
		Key string `json:"key"`
	}
	if err := e.apiCall(ctx, http.MethodPost, "/api/v2/tailnet/-/keys", req, &out); err != nil {
		return "", fmt.Errorf("create an auth key: %w", err)
	}
	return out.Key, nil
}

// AuthKey is an auth key as the API lists it.
type AuthKey struct {
	ID          string `json:"id"`
	Description string `json:"description"`
	// Invalid: used (a single-use key), revoked or expired.
	Invalid bool `json:"invalid"`
}

// AuthKeys lists the tailnet's auth keys through its API.
func (e TailnetEnv) AuthKeys(ctx context.Context) ([]AuthKey, error) {
	var out struct {
		Keys []AuthKey `json:"keys"`
	}
	if err := e.apiCall(ctx, http.MethodGet, "/api/v2/tailnet/-/keys", nil, &out); err != nil {
		return nil, fmt.Errorf("list auth keys: %w", err)
	}
	return out.Keys, nil
}

// SetRoutes approves routes of device id, as an admin does in the console.
func (e TailnetEnv) SetRoutes(ctx context.Context, id string, routes []string) error {
	if err := e.apiCall(ctx, http.MethodPost, "/api/v2/device/"+id+"/routes", map[string]any{"routes": routes}, nil); err != nil {
		return fmt.Errorf("approve routes %v of device %s: %w", routes, id, err)
	}
	return nil
}

// apiCall sends body as JSON to the API's path and decodes the answer into
// out (nil: ignored).
func (e TailnetEnv) apiCall(ctx context.Context, method, path string, body, out any) error {
	client, base, err := e.apiClient(ctx)
	if err != nil {
		return err
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %s", method, path, resp.Status)
	}
	if out == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// connectorHost is the device of the seed's subnet router (hostnamePrefix
// ts-pod-cidrs, one replica).
const connectorHost = "ts-pod-cidrs-0"

// connectorTarget is the seed's subnet-router Connector, its route narrowed
// to the IP of the postgres echo's Pod (devcluster's pod subnet, not the
// seed's 10.42.0.0/16) and the bench's ProxyClass named, its route approved
// once its device is there; its clients request the Pod's IP through the
// route.
func connectorTarget() migrateTarget {
	var podURL, route string
	return migrateTarget{name: "Connector (subnet router): a Pod IP through its route", hosts: []string{connectorHost}, routed: true,
		url: func(string) string { return podURL },
		objects: func(e *Env) ([]*unstructured.Unstructured, error) {
			o, err := e.seedObject("examples/seed/04-connector-subnet-router.yaml", nil)
			if err != nil {
				return nil, err
			}
			o.SetNamespace("")
			// The official operator gives a Connector no default
			// ProxyClass: without this one its Pod would pull an image,
			// and no registry is reachable.
			if err := unstructured.SetNestedField(o.Object, OfficialProxyClass, "spec", "proxyClass"); err != nil {
				return nil, err
			}
			if route == "" {
				ip, err := e.podIP(context.Background(), "app=postgres")
				if err != nil {
					return nil, err
				}
				route = netip.PrefixFrom(ip, ip.BitLen()).String()
				podURL = "http://" + netip.AddrPortFrom(ip, 5432).String() + "/"
			}
			if err := unstructured.SetNestedStringSlice(o.Object, []string{route}, "spec", "subnetRouter", "advertiseRoutes"); err != nil {
				return nil, err
			}
			return []*unstructured.Unstructured{o}, nil
		},
		prepare: func(ctx context.Context, e *Env) error {
			return Poll(ctx, 4*time.Minute, time.Second, func() (bool, error) {
				devs, err := e.Tailnet.Devices(ctx)
				if err != nil {
					return false, err
				}
				for _, d := range devs {
					if strings.HasPrefix(d.Name, connectorHost+".") {
						err := e.Tailnet.SetRoutes(ctx, d.ID, []string{route})
						return err == nil, err
					}
				}
				return false, nil
			}, "the Connector's device, to approve its route")
		}}
}

// podIP is the IP of the first Pod in default with labels sel.
func (e *Env) podIP(ctx context.Context, sel string) (netip.Addr, error) {
	pods, err := e.Cluster.Kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return netip.Addr{}, err
	}
	for _, p := range pods.Items {
		if ip, err := netip.ParseAddr(p.Status.PodIP); err == nil {
			return ip, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("no Pod %s with an IP in default", sel)
}

// routesDir is where the in-process tailnet node keeps its files.
func (e *Env) routesDir() string { return filepath.Join(e.Cfg.Work, "routes-client") }
