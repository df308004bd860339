package device

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/charmbracelet/log"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/internal/proxystate"
	"github.com/tailplane/tailplane/internal/tailnet"
)

// Set is what exists of a parent's workload in the cluster.
type Set struct {
	Parent proxyset.Parent
	// Names are replica 0's names.
	Names proxyset.Names
	// Replicas are the wanted replicas, in ordinal order, with whatever
	// exists of them.
	Replicas []Replica
	// Extra are replicas that exist beyond the wanted number (to be
	// removed), in ordinal order.
	Extra []Replica
	// LegacyConfig is the config Secret of a release that ran one replica
	// ("<base>-config"), if it still exists.
	LegacyConfig *corev1.Secret
}

// All returns the wanted replicas, then the extra ones.
func (s *Set) All() []Replica { return append(slices.Clone(s.Replicas), s.Extra...) }

// Replica is what exists of one replica: its Secrets (nil when absent or,
// for Config, not read) and the device it reported in its state Secret.
type Replica struct {
	Names  proxyset.Names
	Config *corev1.Secret
	State  *corev1.Secret
	Device proxyset.Device
}

// Devices reads and removes the replicas of workloads, and hands each one
// the auth key its config must carry. One Devices serves every parent of
// every workload kind that shares Kind and KeyInConfig.
type Devices struct {
	// Kube and Namespace are where the replicas' Secrets live.
	Kube      kubernetes.Interface
	Namespace string
	// Log gets a line for every key minted or revoked and every device
	// deleted.
	Log *log.Logger
	// Kind names the workload in those lines, and is their key: "proxy".
	Kind string
	// KeyInConfig returns the auth key a replica's config Secret carries
	// ("" for none), in the workload's own config format.
	KeyInConfig func(config *corev1.Secret) string

	mu sync.Mutex
	// settled holds the base names of the sets whose last read from the
	// API server showed nothing a cached read misses (see Read).
	settled map[string]bool
}

// Read returns what exists of parent's workload: want wanted replicas, and
// every other one in Extra.
//
// cached are the parent's state Secrets as an informer holds them (nil when
// the caller has none). They are used instead of a List on the API server
// only while nothing in them calls for the config Secrets: every wanted
// replica has a device, and the set's last read from the API server showed
// each one's config without a key and no Secret the informer does not see
// (a state Secret without the parent's role, the config of an earlier
// release). A replica without a device is about to be handed a key, and
// the auth-key decision must see the latest config (a key written there in
// the previous cycle must be reused, not a second one minted): that read
// goes to the API server.
func (d *Devices) Read(ctx context.Context, parent proxyset.Parent, want int, cached []*corev1.Secret) (*Set, error) {
	names := parent.Names()
	if cached != nil && d.isSettled(names.Base) {
		if set := Group(parent, want, cached); allHaveDevices(set) {
			return set, nil
		}
	}
	list, err := d.list(ctx, parent)
	if err != nil {
		return nil, err
	}
	set := Group(parent, want, list)
	if cached != nil {
		// Only callers with a cache are remembered: a set read by others
		// alone leaves no entry behind.
		d.setSettled(names.Base, d.cacheSuffices(set))
	}
	return set, nil
}

func (d *Devices) list(ctx context.Context, parent proxyset.Parent) ([]*corev1.Secret, error) {
	sel := labels.SelectorFromSet(parent.OfficialLabels()).String()
	list, err := d.Kube.CoreV1().Secrets(d.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("list Secrets of proxy %s: %w", parent.Names().Base, err)
	}
	out := make([]*corev1.Secret, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

// Group sorts a parent's Secrets into its replicas: want wanted ones, the
// others in Extra. Secrets that are no replica's of parent (another
// workload of the same parent, a TLS copy) are left out.
func Group(parent proxyset.Parent, want int, secrets []*corev1.Secret) *Set {
	names := parent.Names()
	set := &Set{Parent: parent, Names: names}
	found := map[int]*Replica{}
	get := func(i int) *Replica {
		if found[i] == nil {
			found[i] = &Replica{Names: names.Replica(i)}
		}
		return found[i]
	}
	for _, s := range secrets {
		if s.Name == names.LegacyConfigSecret() {
			set.LegacyConfig = s
			continue
		}
		ordinal, ok := proxyset.OrdinalOf(names.Base, s.Name)
		if !ok {
			continue
		}
		switch s.Labels[proxystate.LabelSecretType] {
		case proxyset.SecretTypeConfig:
			get(ordinal).Config = s
		case proxyset.SecretTypeState:
			r := get(ordinal)
			r.State = s
			// A malformed device_ips only loses the addresses.
			r.Device, _ = proxyset.DeviceFromState(s)
		}
	}
	for i := 0; i < want; i++ {
		set.Replicas = append(set.Replicas, *get(i))
	}
	for i, r := range found {
		if i >= want {
			set.Extra = append(set.Extra, *r)
		}
	}
	slices.SortFunc(set.Extra, func(a, b Replica) int { return a.Names.Ordinal - b.Names.Ordinal })
	return set
}

func allHaveDevices(set *Set) bool {
	for _, r := range set.Replicas {
		if r.Device.ID == "" {
			return false
		}
	}
	return true
}

// cacheSuffices reports whether a set read from the API server holds
// nothing a read of the cached state Secrets would miss or need.
func (d *Devices) cacheSuffices(set *Set) bool {
	if set.LegacyConfig != nil || !allHaveDevices(set) {
		return false
	}
	for _, r := range set.All() {
		if r.State == nil || r.State.Labels[proxyset.LabelProxyRole] != set.Parent.Role || set.Parent.Role == "" {
			return false
		}
	}
	for _, r := range set.Replicas {
		if r.Config != nil && d.KeyInConfig(r.Config) != "" {
			return false
		}
	}
	return true
}

func (d *Devices) isSettled(base string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.settled[base]
}

func (d *Devices) setSettled(base string, settled bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !settled {
		delete(d.settled, base)
		return
	}
	if d.settled == nil {
		d.settled = map[string]bool{}
	}
	d.settled[base] = true
}

// AuthKey returns the auth key replica r's config must carry: none once it
// has a device, the unused key already in its config, or a fresh one minted
// with tags (Keys.Mint), described with the replica's name
// (proxyset.KeyDescription). Once the device logged in, its key (spent now)
// leaves the config, and every other key minted for the replica is revoked:
// nothing needs them any more.
func (d *Devices) AuthKey(ctx context.Context, be tailnet.Backend, r Replica, tags []string) (string, error) {
	desc := proxyset.KeyDescription(r.Names.Base, r.Names.Ordinal)
	var inConfig string
	if r.Config != nil {
		inConfig = d.KeyInConfig(r.Config)
	}
	switch {
	case r.Device.ID != "":
		if inConfig != "" {
			return "", d.keys(be).RevokeUnused(ctx, func(s string) bool { return s == desc })
		}
		return "", nil
	case inConfig != "":
		return inConfig, nil
	}
	k, err := d.keys(be).Mint(ctx, desc, tags)
	if err != nil {
		return "", err
	}
	d.Log.Info("minted an auth key for a "+d.Kind, d.Kind, r.Names.StateSecret, "key_id", k.ID)
	return k.Key, nil
}

func (d *Devices) keys(be tailnet.Backend) Keys {
	return Keys{Backend: be, Log: d.Log, Of: "a " + d.Kind}
}

// ScaleDown removes the set's Extra replicas (RemoveReplica), once the
// workload no longer runs them, and the single config Secret of an earlier
// release with its unused keys.
func (d *Devices) ScaleDown(ctx context.Context, be tailnet.Backend, set *Set) error {
	for _, r := range set.Extra {
		if err := d.RemoveReplica(ctx, be, r); err != nil {
			return err
		}
	}
	if set.LegacyConfig != nil {
		legacy := proxyset.KeyDescription(set.Names.Base, -1)
		if err := d.keys(be).RevokeUnused(ctx, func(s string) bool { return s == legacy }); err != nil {
			return err
		}
		if err := ignoreNotFound(d.Kube.CoreV1().Secrets(d.Namespace).Delete(ctx, set.LegacyConfig.Name, metav1.DeleteOptions{})); err != nil {
			return fmt.Errorf("delete Secret %s: %w", set.LegacyConfig.Name, err)
		}
	}
	return nil
}

// RemoveReplica deletes one replica's device (404 counts as done), revokes
// its unused auth keys, then deletes its config Secret and, last, its state
// Secret (which keeps the device's ID until the device is gone).
func (d *Devices) RemoveReplica(ctx context.Context, be tailnet.Backend, r Replica) error {
	if r.Device.ID != "" {
		if err := be.DeleteDevice(ctx, r.Device.ID); err != nil {
			return fmt.Errorf("tailnet API: delete device of %s: %w", r.Names.StateSecret, err)
		}
		d.Log.Info("deleted the device of a "+d.Kind+" replica", d.Kind, r.Names.StateSecret, "device", r.Device.ID)
	}
	desc := proxyset.KeyDescription(r.Names.Base, r.Names.Ordinal)
	if err := d.keys(be).RevokeUnused(ctx, func(s string) bool { return s == desc }); err != nil {
		return err
	}
	secrets := d.Kube.CoreV1().Secrets(d.Namespace)
	if err := ignoreNotFound(secrets.Delete(ctx, r.Names.ConfigSecret, metav1.DeleteOptions{})); err != nil {
		return fmt.Errorf("delete Secret %s: %w", r.Names.ConfigSecret, err)
	}
	if err := ignoreNotFound(secrets.Delete(ctx, r.Names.StateSecret, metav1.DeleteOptions{})); err != nil {
		return fmt.Errorf("delete Secret %s: %w", r.Names.StateSecret, err)
	}
	return nil
}

// Remove removes every replica of parent's workload, which must no longer
// run: the devices first, and the unused keys of every replica (and of the
// single-replica proxy of earlier releases) before the config Secrets go,
// so that a key minted and never recorded does not stay valid; then every
// Secret named after the set, the state Secrets last. It is idempotent. A
// nil be (the parent's tailnet is gone) leaves the devices and keys in that
// tailnet, which the operator can no longer reach.
func (d *Devices) Remove(ctx context.Context, be tailnet.Backend, parent proxyset.Parent) error {
	names := parent.Names()
	secrets, err := d.list(ctx, parent)
	if err != nil {
		return err
	}
	if be != nil {
		for _, r := range Group(parent, 0, secrets).Extra {
			if r.Device.ID != "" {
				if err := be.DeleteDevice(ctx, r.Device.ID); err != nil {
					return fmt.Errorf("tailnet API: delete device of %s: %w", r.Names.StateSecret, err)
				}
			}
		}
		legacy := proxyset.KeyDescription(names.Base, -1)
		if err := d.keys(be).RevokeUnused(ctx, func(s string) bool {
			return s == legacy || proxyset.IsReplicaKeyDescription(names.Base, s)
		}); err != nil {
			return err
		}
	}
	bg := metav1.DeletePropagationBackground
	opts := metav1.DeleteOptions{PropagationPolicy: &bg}
	api := d.Kube.CoreV1().Secrets(d.Namespace)
	var errs []error
	var states []string
	for _, s := range secrets {
		switch {
		case s.Name != names.Base && !strings.HasPrefix(s.Name, names.Base+"-"):
		case s.Labels[proxystate.LabelSecretType] == proxyset.SecretTypeState:
			states = append(states, s.Name)
		default:
			errs = append(errs, ignoreNotFound(api.Delete(ctx, s.Name, opts)))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("delete proxy %s: %w", names.Base, err)
	}
	for _, name := range states {
		if err := ignoreNotFound(api.Delete(ctx, name, opts)); err != nil {
			return fmt.Errorf("delete state Secret %s/%s: %w", d.Namespace, name, err)
		}
	}
	d.setSettled(names.Base, false)
	return nil
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
