package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/tailplane/tailplane/handlers/lib/device"
	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/internal/proxystate"
	"github.com/tailplane/tailplane/internal/tailnet"
)

// Proxy is what exists of a parent's proxy in the cluster (see
// device.Set).
type Proxy = device.Set

// Replica is what exists of one replica of a proxy (see device.Replica).
type Replica = device.Replica

// ReadProxy reads a parent's proxy Secrets from the API server (not a cache:
// callers decide on what they read); want is the number of wanted replicas,
// and every replica beyond it is in Extra.
func (p *Pipeline) ReadProxy(ctx context.Context, parent proxyset.Parent, want int) (*Proxy, error) {
	return p.dev.Read(ctx, parent, want, nil)
}

// deleteProxy removes a parent's proxy: the StatefulSet first (so the
// proxies stop), then the other objects named after the proxy, then every
// replica's device, keys and Secrets, the state Secrets last
// (device.Devices.Remove). It is idempotent.
// A nil be (the parent's Tailnet is gone) leaves the devices and keys in
// that tailnet, which the operator can no longer reach.
func (p *Pipeline) deleteProxy(ctx context.Context, be tailnet.Backend, parent proxyset.Parent) error {
	names := parent.Names()
	if err := p.deleteProxyObjects(ctx, names.Base, parent.OfficialLabels()); err != nil {
		return err
	}
	p.d.ForgetProxy(p.d.Settings.Namespace, names.Base)
	if err := p.dev.Remove(ctx, be, parent); err != nil {
		return err
	}
	p.claims.Release(parent)
	return nil
}

// deleteProxyObjects deletes the objects of the proxy named base (its
// objects carry parentLabels) but its replicas' Secrets: the StatefulSet
// first, then its Pods (removedProxyGrace), its Services, Role,
// RoleBinding and ServiceAccount.
func (p *Pipeline) deleteProxyObjects(ctx context.Context, base string, parentLabels map[string]string) error {
	ns := p.d.Settings.Namespace
	bg := metav1.DeletePropagationBackground
	opts := metav1.DeleteOptions{PropagationPolicy: &bg}
	if err := ignoreNotFound(p.d.Kube.AppsV1().StatefulSets(ns).Delete(ctx, base, opts)); err != nil {
		return fmt.Errorf("delete StatefulSet %s/%s: %w", ns, base, err)
	}
	sel := labels.SelectorFromSet(parentLabels).String()
	ours := func(name string) bool { return name == base || strings.HasPrefix(name, base+"-") }
	if err := p.stopPods(ctx, sel, ours); err != nil {
		return err
	}
	services, err := p.d.Kube.CoreV1().Services(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return fmt.Errorf("list Services of %s: %w", base, err)
	}
	var errs []error
	for _, s := range services.Items {
		if ours(s.Name) {
			errs = append(errs, ignoreNotFound(p.d.Kube.CoreV1().Services(ns).Delete(ctx, s.Name, opts)))
		}
	}
	errs = append(errs,
		ignoreNotFound(p.d.Kube.RbacV1().RoleBindings(ns).Delete(ctx, base, opts)),
		ignoreNotFound(p.d.Kube.RbacV1().Roles(ns).Delete(ctx, base, opts)),
		ignoreNotFound(p.d.Kube.CoreV1().ServiceAccounts(ns).Delete(ctx, base, opts)))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("delete proxy %s: %w", base, err)
	}
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
