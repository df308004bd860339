package proxyset

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/tailplane/tailplane/internal/proxystate"
	"github.com/tailplane/tailplane/proxy/config"
)

// Device is what a proxy reported about its tailnet device in its state
// Secret.
type Device struct {
	// ID is the stable node ID (device_id); empty until the proxy logged in.
	ID string
	// FQDN is the MagicDNS name without the trailing dot (device_fqdn).
	FQDN string
	// IPs are the tailnet addresses (device_ips).
	IPs []string
	// AdvertisedRoutes are the routes the device advertises, and
	// ApprovedRoutes those of them control approved
	// (device_advertised_routes, device_approved_routes).
	AdvertisedRoutes, ApprovedRoutes []string
	// Services are the Tailscale Services a ProxyGroup replica hosts, by
	// name (tailscale_services).
	Services map[string]proxystate.ServiceReport
}

// Advertises reports whether the device advertises the Tailscale Service
// name.
func (d Device) Advertises(name string) bool { return d.Services[name].Advertised }

// UnapprovedRoutes are the advertised routes control has not approved.
func (d Device) UnapprovedRoutes() []string {
	var out []string
	for _, r := range d.AdvertisedRoutes {
		if !slices.Contains(d.ApprovedRoutes, r) {
			out = append(out, r)
		}
	}
	return out
}

// DeviceFromState reads the device keys of a state Secret. A nil Secret or
// missing keys give an empty Device; a device_ips value that is not a JSON
// list of strings is an error.
func DeviceFromState(state *corev1.Secret) (Device, error) {
	if state == nil {
		return Device{}, nil
	}
	d := Device{
		ID:   string(state.Data[proxystate.KeyDeviceID]),
		FQDN: strings.TrimSuffix(string(state.Data[proxystate.KeyDeviceFQDN]), "."),
	}
	for key, dst := range map[string]*[]string{proxystate.KeyDeviceIPs: &d.IPs,
		proxystate.KeyDeviceAdvertisedRoutes: &d.AdvertisedRoutes, proxystate.KeyDeviceApprovedRoutes: &d.ApprovedRoutes} {
		if raw := state.Data[key]; len(raw) > 0 {
			if err := json.Unmarshal(raw, dst); err != nil {
				return d, fmt.Errorf("state Secret %s: %s is not a JSON list of addresses: %w", state.Name, key, err)
			}
		}
	}
	if raw := state.Data[proxystate.KeyServices]; len(raw) > 0 {
		if err := json.Unmarshal(raw, &d.Services); err != nil {
			return d, fmt.Errorf("state Secret %s: %s is not a JSON object of service reports: %w", state.Name, proxystate.KeyServices, err)
		}
	}
	return d, nil
}

// AuthKeyFor decides the auth key to put in the config. Once the proxy has
// a device (device_id in its state), no key is needed: the config carries
// none, as in the official operator. Before that, a key already in the
// config Secret is kept, so that re-renders never mint a second key.
// Otherwise mint is true: the caller mints one through the tailnet API.
func AuthKeyFor(configSecret, state *corev1.Secret) (key string, mint bool) {
	if state != nil && len(state.Data[proxystate.KeyDeviceID]) > 0 {
		return "", false
	}
	if configSecret != nil {
		if raw := configSecret.Data[config.SecretKey]; len(raw) > 0 {
			var c config.Config
			if json.Unmarshal(raw, &c) == nil && c.AuthKey != "" {
				return c.AuthKey, false
			}
		}
	}
	return "", true
}

// Named reports whether the device's MagicDNS name is hostname (its first
// label, compared without regard to case): a device renamed by its proxy
// keeps its old name until control has renamed it. hostname-N counts too:
// control gives that name when another device holds hostname, such as the
// same ProxyGroup's replica in another cluster on the tailnet, and the
// device keeps it for as long as the other lives. (A rename from exactly
// hostname-N to hostname is so told done before control made it.)
func (d Device) Named(hostname string) bool {
	label, _, _ := strings.Cut(d.FQDN, ".")
	if label == "" || len(label) < len(hostname) || !strings.EqualFold(label[:len(hostname)], hostname) {
		return false
	}
	suffix := label[len(hostname):]
	if suffix == "" {
		return true
	}
	n := strings.TrimPrefix(suffix, "-")
	return n != suffix && n != "" && strings.Trim(n, "0123456789") == ""
}

// keyDescriptionPrefix starts the description of every auth key minted
// for a proxy.
const keyDescriptionPrefix = "tailplane "

// KeyDescription is the description of the auth keys minted for replica
// ordinal of the proxy whose objects are named base (Names.Base): "tailplane ",
// base and "-<ordinal>", the parent's name in base shortened so that the
// whole fits the API's 50 characters. The hash ending base keeps it unique,
// so that keys minted for a replica and never recorded (the operator died
// before writing the config) are found again and revoked. Ordinal -1 gives
// the description of releases that ran one replica per proxy, without the
// ordinal.
func KeyDescription(base string, ordinal int) string {
	const room = 50 - len(keyDescriptionPrefix)
	// base is "ts-<name>-<8 hex>".
	cut := max(len(base)-9, 0)
	head, tail := base[:cut], base[cut:]
	if ordinal >= 0 {
		tail += "-" + strconv.Itoa(ordinal)
	}
	if len(head)+len(tail) > room {
		head = strings.TrimRight(head[:max(room-len(tail), 0)], "-.")
	}
	return keyDescriptionPrefix + head + tail
}

// IsReplicaKeyDescription reports whether desc is KeyDescription(base, i)
// for some replica i.
func IsReplicaKeyDescription(base, desc string) bool {
	i := strings.LastIndexByte(desc, '-')
	if i < 0 {
		return false
	}
	n, err := strconv.Atoi(desc[i+1:])
	return err == nil && n >= 0 && KeyDescription(base, n) == desc
}
