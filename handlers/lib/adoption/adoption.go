// Package adoption finds what the official Tailscale operator left of a
// parent's proxy in the operator namespace, and decides what of it
// Tailplane's proxy takes over, so that a cluster switched from the official
// operator keeps its devices: same node key, node ID, tailnet addresses,
// MagicDNS name and certificate (docs/migration.md).
//
// Both operators keep a replica's tailscaled state in a Secret of
// kubestore's layout, so taking a device over is copying its state keys;
// the official operator's own keys (containerboot config, serve config) are
// left behind. The package is pure: handlers/lib/pipeline lists the objects
// and applies the decisions. It imports k8s.io/api, apimachinery,
// handlers/lib/proxyset and internal/proxystate.
package adoption

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/internal/proxystate"
)

// Selector selects the objects the official operator made for parent p in
// the operator namespace: they carry its parent labels and, unlike
// Tailplane's, no proxyset.LabelProxyRole. The namespace label is not in it
// (the official operator sets it empty on cluster-scoped parents, or not at
// all); Belongs checks it.
func Selector(p proxyset.Parent) labels.Selector {
	sel := labels.SelectorFromSet(labels.Set{
		proxystate.LabelManaged:    "true",
		proxystate.LabelParentName: proxyset.TruncateLabelValue(p.Name),
		proxystate.LabelParentType: p.Type,
	})
	notOurs, err := labels.NewRequirement(proxyset.LabelProxyRole, selection.DoesNotExist, nil)
	if err != nil {
		panic(err) // a constant key: cannot fail
	}
	return sel.Add(*notOurs)
}

// Belongs reports whether an object Selector matched is p's: its namespace
// label names p's namespace (absent or empty for a cluster-scoped parent).
func Belongs(objLabels map[string]string, p proxyset.Parent) bool {
	return objLabels[proxystate.LabelParentNamespace] == p.Namespace
}

// Replica is one replica of an official proxy, found by its state Secret.
type Replica struct {
	// Ordinal is the replica's index: the state Secret is named like its
	// Pod, "<statefulset>-<ordinal>".
	Ordinal int
	// State is the official state Secret.
	State *corev1.Secret
	// Device is what the official proxy reported of its device.
	Device proxyset.Device
}

// HasIdentity reports whether the replica's state holds a node identity
// worth keeping: a machine key and a current profile (the node key is in
// the profile). A replica that never logged in has none; its device, if
// any, is made anew.
func (r Replica) HasIdentity() bool {
	return len(r.State.Data[keyMachineKey]) > 0 && len(r.State.Data[keyCurrentProfile]) > 0
}

// The tailscaled state keys HasIdentity looks for (ipn.MachineKeyStateKey
// and ipn.CurrentProfileStateKey, as kubestore names them).
const (
	keyMachineKey     = "_machinekey"
	keyCurrentProfile = "_current-profile"
)

// Find returns the official replicas among secrets (as listed with
// Selector, for parent p), by ordinal: the state Secrets, that is those of
// secret type "state" or of none (a single proxy's one Secret holds both its
// config and its state). Config Secrets, Secrets of p's other roles and
// names without an ordinal are not replicas. Two Secrets of one ordinal
// (two official proxies, which the official operator never leaves) keep the
// one with a device.
func Find(p proxyset.Parent, secrets []corev1.Secret) []Replica {
	byOrdinal := map[int]Replica{}
	for i := range secrets {
		s := &secrets[i]
		if !Belongs(s.Labels, p) {
			continue
		}
		if t := s.Labels[proxystate.LabelSecretType]; t != "" && t != proxyset.SecretTypeState {
			continue
		}
		ordinal, ok := ordinalOf(s.Name)
		if !ok {
			continue
		}
		dev, _ := proxyset.DeviceFromState(s) // a garbled list only loses the addresses
		r := Replica{Ordinal: ordinal, State: s, Device: dev}
		if old, dup := byOrdinal[ordinal]; dup && (old.Device.ID != "" || r.Device.ID == "") {
			continue
		}
		byOrdinal[ordinal] = r
	}
	out := make([]Replica, 0, len(byOrdinal))
	for _, r := range byOrdinal {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b Replica) int { return a.Ordinal - b.Ordinal })
	return out
}

// ordinalOf is the trailing "-<n>" of a replica Secret's name.
func ordinalOf(name string) (int, bool) {
	i := strings.LastIndexByte(name, '-')
	if i < 0 {
		return 0, false
	}
	n, err := strconv.Atoi(name[i+1:])
	if err != nil || n < 0 || strconv.Itoa(n) != name[i+1:] {
		return 0, false
	}
	return n, true
}

// Carried returns the keys of an official state Secret that Tailplane's
// proxy takes over: tailscaled's state (machine key, profiles, the node key
// within them), the certificates and ACME account key tailscaled stored
// there, and the device keys the operators read (device_id, device_fqdn,
// device_ips), so that the device is known before the new proxy starts and
// no auth key is minted for it. Left behind:
//   - the official operator's config: containerboot's tailscaled configs
//     (cap-<version>.hujson) and serve config (serve-config);
//   - tailscaled's stored serve configs (_serve/<profile>): containerboot
//     set them through the LocalAPI, and a node that loads one serves it
//     in front of the proxy's own listeners;
//   - containerboot's status keys the new proxy rewrites or does not use
//     (pod_uid, tailscale_capver, https_endpoint and the like).
func Carried(data map[string][]byte) map[string][]byte {
	out := map[string][]byte{}
	for k, v := range data {
		if carried(k) {
			out[k] = slices.Clone(v)
		}
	}
	return out
}

func carried(key string) bool {
	switch key {
	case proxystate.KeyDeviceID, proxystate.KeyDeviceFQDN, proxystate.KeyDeviceIPs:
		return true
	case "serve-config":
		return false
	}
	switch {
	case strings.HasPrefix(key, "cap-") && strings.HasSuffix(key, ".hujson"):
		return false
	case strings.HasPrefix(key, "_serve"):
		return false
	case strings.HasPrefix(key, "_"), strings.HasPrefix(key, "profile-"):
		return true // tailscaled's own keys (_machinekey, _profiles, ...)
	case strings.HasSuffix(key, ".crt"), strings.HasSuffix(key, ".key"), strings.HasSuffix(key, ".key.pem"):
		return true // certificates and the ACME account key
	}
	return false
}

// Describe names a replica's device for status messages, Events and logs:
// "web.tailnet.ts.net (node nXYZ, 100.64.0.3)", or the state Secret's name
// for a replica without a device.
func (r Replica) Describe() string {
	d := r.Device
	if d.ID == "" {
		return "no device (state Secret " + r.State.Name + ")"
	}
	name := d.FQDN
	if name == "" {
		name = "device"
	}
	if len(d.IPs) == 0 {
		return fmt.Sprintf("%s (node %s)", name, d.ID)
	}
	return fmt.Sprintf("%s (node %s, %s)", name, d.ID, strings.Join(d.IPs, ", "))
}

// DryRun is the message of a parent whose official proxy a dry run would
// take over: what would be kept and what would be made anew.
func DryRun(replicas []Replica, leftovers []string) string {
	var keep, anew []string
	for _, r := range replicas {
		if r.HasIdentity() {
			keep = append(keep, r.Describe())
		} else {
			anew = append(anew, r.State.Name)
		}
	}
	var b strings.Builder
	b.WriteString("the official operator's proxy is left in place (OPERATOR_ADOPT_OFFICIAL=dry-run)")
	if len(keep) > 0 {
		fmt.Fprintf(&b, "; adoption would keep device %s", strings.Join(keep, "; "))
	}
	if len(anew) > 0 {
		fmt.Fprintf(&b, "; replicas that never logged in, made anew: %s", strings.Join(anew, ", "))
	}
	if len(leftovers) > 0 {
		fmt.Fprintf(&b, "; and would delete %s", strings.Join(leftovers, ", "))
	}
	return b.String()
}
