package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/internal/proxystate"
	"github.com/tailplane/tailplane/internal/tailnet"
)

// Proxy is what exists of a parent's proxy in the cluster.
type Proxy struct {
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
func (p *Proxy) All() []Replica { return append(slices.Clone(p.Replicas), p.Extra...) }

// Replica is what exists of one replica: its Secrets (nil when absent) and
// the device its proxy reported.
type Replica struct {
	Names  proxyset.Names
	Config *corev1.Secret
	State  *corev1.Secret
	Device proxyset.Device
}

// ReadProxy reads a parent's proxy Secrets from the API server (not a cache:
// the auth-key decision must see the latest config); want is the number of
// wanted replicas, and every replica beyond it is in Extra.
func (p *Pipeline) ReadProxy(ctx context.Context, parent proxyset.Parent, want int) (*Proxy, error) {
	return p.read(ctx, parent, want)
}

func (p *Pipeline) read(ctx context.Context, parent proxyset.Parent, want int) (*Proxy, error) {
	names := parent.Names()
	ns := p.d.Settings.Namespace
	sel := labels.SelectorFromSet(proxyset.ChildLabels(parent.Type, parent.Namespace, parent.Name)).String()
	list, err := p.d.Kube.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("list Secrets of proxy %s: %w", names.Base, err)
	}
	proxy := &Proxy{Parent: parent, Names: names}
	found := map[int]*Replica{}
	get := func(i int) *Replica {
		if found[i] == nil {
			found[i] = &Replica{Names: names.Replica(i)}
		}
		return found[i]
	}
	for i := range list.Items {
		s := &list.Items[i]
		if s.Name == names.LegacyConfigSecret() {
			proxy.LegacyConfig = s
			continue
		}
		ordinal, ok := proxyset.OrdinalOf(names.Base, s.Name)
		if !ok {
			continue // another module's proxy of the same parent, a TLS copy
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
		proxy.Replicas = append(proxy.Replicas, *get(i))
	}
	for i, r := range found {
		if i >= want {
			proxy.Extra = append(proxy.Extra, *r)
		}
	}
	slices.SortFunc(proxy.Extra, func(a, b Replica) int { return a.Names.Ordinal - b.Names.Ordinal })
	return proxy, nil
}

// scaleDown removes the replicas beyond the wanted number, once the
// StatefulSet no longer runs them: each one's device, unused auth keys and
// Secrets. The single config Secret of an earlier release goes too.
func (p *Pipeline) scaleDown(ctx context.Context, be tailnet.Backend, proxy *Proxy) error {
	for _, r := range proxy.Extra {
		if err := p.removeReplica(ctx, be, r); err != nil {
			return err
		}
	}
	if proxy.LegacyConfig != nil {
		if err := p.revokeUnusedKeys(ctx, be, proxyset.KeyDescription(proxy.Names.Base, -1)); err != nil {
			return err
		}
		if err := ignoreNotFound(p.d.Kube.CoreV1().Secrets(p.d.Settings.Namespace).Delete(ctx, proxy.LegacyConfig.Name, metav1.DeleteOptions{})); err != nil {
			return fmt.Errorf("delete Secret %s: %w", proxy.LegacyConfig.Name, err)
		}
	}
	return nil
}

// removeReplica deletes one replica's device (404 counts as done), revokes
// its unused auth keys, then deletes its config Secret and, last, its state
// Secret (whose role label keeps the parent's handlers).
func (p *Pipeline) removeReplica(ctx context.Context, be tailnet.Backend, r Replica) error {
	if r.Device.ID != "" {
		if err := be.DeleteDevice(ctx, r.Device.ID); err != nil {
			return fmt.Errorf("tailnet API: delete device of %s: %w", r.Names.StateSecret, err)
		}
		p.d.Log.Info("deleted the device of a proxy replica", "proxy", r.Names.StateSecret, "device", r.Device.ID)
	}
	if err := p.revokeUnusedKeys(ctx, be, proxyset.KeyDescription(r.Names.Base, r.Names.Ordinal)); err != nil {
		return err
	}
	secrets := p.d.Kube.CoreV1().Secrets(p.d.Settings.Namespace)
	if err := ignoreNotFound(secrets.Delete(ctx, r.Names.ConfigSecret, metav1.DeleteOptions{})); err != nil {
		return fmt.Errorf("delete Secret %s: %w", r.Names.ConfigSecret, err)
	}
	if err := ignoreNotFound(secrets.Delete(ctx, r.Names.StateSecret, metav1.DeleteOptions{})); err != nil {
		return fmt.Errorf("delete Secret %s: %w", r.Names.StateSecret, err)
	}
	return nil
}

// deleteProxy removes a parent's proxy: the StatefulSet first (so the
// proxies stop), then every replica's device and Secrets, then the other
// objects named after the proxy, the state Secrets last. It is idempotent.
// A nil be (the parent's Tailnet is gone) leaves the devices and keys in
// that tailnet, which the operator can no longer reach.
func (p *Pipeline) deleteProxy(ctx context.Context, be tailnet.Backend, parent proxyset.Parent) error {
	ns := p.d.Settings.Namespace
	names := parent.Names()
	bg := metav1.DeletePropagationBackground
	opts := metav1.DeleteOptions{PropagationPolicy: &bg}
	if err := ignoreNotFound(p.d.Kube.AppsV1().StatefulSets(ns).Delete(ctx, names.Base, opts)); err != nil {
		return fmt.Errorf("delete StatefulSet %s/%s: %w", ns, names.Base, err)
	}
	sel := labels.SelectorFromSet(proxyset.ChildLabels(parent.Type, parent.Namespace, parent.Name)).String()
	ours := func(name string) bool { return name == names.Base || strings.HasPrefix(name, names.Base+"-") }
	if err := p.stopPods(ctx, sel, ours); err != nil {
		return err
	}
	proxy, err := p.read(ctx, parent, 0)
	if err != nil {
		return err
	}
	// Devices first, and keys before the config Secrets go: a key minted
	// and never recorded must not stay valid.
	for _, r := range proxy.Extra {
		if r.Device.ID != "" && be != nil {
			if err := be.DeleteDevice(ctx, r.Device.ID); err != nil {
				return fmt.Errorf("tailnet API: delete device of %s: %w", r.Names.StateSecret, err)
			}
		}
	}
	if be != nil {
		if err := p.revokeProxyKeys(ctx, be, names.Base); err != nil {
			return err
		}
	}
	secrets, err := p.d.Kube.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return fmt.Errorf("list Secrets of %s: %w", names.Base, err)
	}
	var errs []error
	var states []string
	for _, s := range secrets.Items {
		switch {
		case !ours(s.Name):
		case s.Labels[proxystate.LabelSecretType] == proxyset.SecretTypeState:
			states = append(states, s.Name)
		default:
			errs = append(errs, ignoreNotFound(p.d.Kube.CoreV1().Secrets(ns).Delete(ctx, s.Name, opts)))
		}
	}
	services, err := p.d.Kube.CoreV1().Services(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return fmt.Errorf("list Services of %s: %w", names.Base, err)
	}
	for _, s := range services.Items {
		if ours(s.Name) {
			errs = append(errs, ignoreNotFound(p.d.Kube.CoreV1().Services(ns).Delete(ctx, s.Name, opts)))
		}
	}
	errs = append(errs,
		ignoreNotFound(p.d.Kube.RbacV1().RoleBindings(ns).Delete(ctx, names.Base, opts)),
		ignoreNotFound(p.d.Kube.RbacV1().Roles(ns).Delete(ctx, names.Base, opts)),
		ignoreNotFound(p.d.Kube.CoreV1().ServiceAccounts(ns).Delete(ctx, names.Base, opts)))
	p.d.ForgetProxy(ns, names.Base)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("delete proxy %s: %w", names.Base, err)
	}
	for _, name := range states {
		if err := ignoreNotFound(p.d.Kube.CoreV1().Secrets(ns).Delete(ctx, name, opts)); err != nil {
			return fmt.Errorf("delete state Secret %s/%s: %w", ns, name, err)
		}
	}
	p.claims.release(parent)
	return nil
}

// removedProxyGrace is the grace period of a removed proxy's Pods: its
// device is deleted right after, so a drain serves nobody, and a parent
// re-created under the same name gets Pods of the same names, which the
// StatefulSet controller starts only once the old ones are gone.
const removedProxyGrace int64 = 1

// stopPods deletes the Pods of a removed proxy (label selector sel, names
// for which ours is true) with removedProxyGrace.
func (p *Pipeline) stopPods(ctx context.Context, sel string, ours func(string) bool) error {
	ns := p.d.Settings.Namespace
	pods, err := p.d.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return fmt.Errorf("list Pods of a removed proxy (%s): %w", sel, err)
	}
	grace := removedProxyGrace
	for _, pod := range pods.Items {
		if !ours(pod.Name) || (pod.DeletionGracePeriodSeconds != nil && *pod.DeletionGracePeriodSeconds <= grace) {
			continue
		}
		if err := ignoreNotFound(p.d.Kube.CoreV1().Pods(ns).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &grace})); err != nil {
			return fmt.Errorf("delete Pod %s/%s of a removed proxy: %w", ns, pod.Name, err)
		}
	}
	return nil
}

// adoptLegacy deletes the proxy an earlier release made for this module
// under LegacyNameKey, if the parent has one: its objects have other names,
// and two proxies must not serve one parent.
func (p *Pipeline) adoptLegacy(ctx context.Context, m *Module, obj interface {
	GetNamespace() string
	GetName() string
	GetAnnotations() map[string]string
}) error {
	legacy := proxyset.Parent{Type: m.ParentType, Namespace: obj.GetNamespace(), Name: obj.GetName(), Role: m.Role, NameKey: m.LegacyNameKey}
	state, err := p.d.Kube.CoreV1().Secrets(p.d.Settings.Namespace).Get(ctx, legacy.Names().StateSecret, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read Secret %s: %w", legacy.Names().StateSecret, err)
	}
	role := state.Labels[proxyset.LabelProxyRole]
	if role != m.Role && !(role == "" && obj.GetAnnotations()[LegacyMark] == m.Role) {
		return nil // another module's proxy
	}
	p.d.Log.Info("replacing a proxy named by an earlier release", "proxy", legacy.Names().Base, "parent", obj.GetNamespace()+"/"+obj.GetName())
	return p.deleteProxy(ctx, p.d.Backend, legacy)
}

// configError is a replica's report that its proxy refused its config, as
// a message ("" when it did not).
func configError(r Replica) string {
	if r.State == nil || len(r.State.Data[proxystate.KeyConfigError]) == 0 {
		return ""
	}
	msg := string(r.State.Data[proxystate.KeyConfigError])
	if strings.Contains(msg, `"funnel" node attribute not set`) {
		return FunnelNotAllowed + "; the proxy says: " + msg
	}
	return "the proxy refused its config: " + msg
}

// configApplied reports whether the replica's running process applied a
// config (config_applied is its Pod's UID): with a config_error, it serves
// all but what the error names (a listener that did not open), or its
// previous config.
func configApplied(r Replica) bool {
	if r.State == nil {
		return false
	}
	applied := r.State.Data[proxystate.KeyConfigApplied]
	return len(applied) > 0 && string(applied) == string(r.State.Data[proxystate.KeyPodUID])
}

// FunnelNotAllowed explains a proxy whose Funnel listener the tailnet
// refused: its device lacks the funnel node attribute.
const FunnelNotAllowed = `Funnel is not allowed for this proxy: the tailnet policy file gives its tags no "funnel" node attribute, ` +
	`so the proxy serves on the tailnet only and nothing publicly. Add a nodeAttrs entry for the proxy's tags, e.g. ` +
	`{"target": ["tag:k8s"], "attr": ["funnel"]}, or remove the tailscale.com/funnel annotation; the proxy retries within a minute`

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
