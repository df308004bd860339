package pipeline

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/handlers/lib/resources"
	"github.com/tailplane/tailplane/internal/proxystate"
	"github.com/tailplane/tailplane/internal/tailnet"
	"github.com/tailplane/tailplane/runtime"
)

// JobStrayProxies is the runtime job that removes proxies whose parent is
// gone.
const JobStrayProxies = "stray-proxies"

// registerStraySweep has the runtime look for stray proxies at every start
// of leadership and every Deps.StrayProxySweep.
//
// A proxy is stray when its parent left the API server without the
// parent's delete handler: someone removed the finalizer by hand, or
// another operator did (the official operator strips tailscale.com/finalizer
// from objects it does not serve, and both use that name). Its Pods, device,
// auth keys and Secrets would otherwise stay for good. A parent made again
// under the same name meanwhile finds the stray proxy itself
// (dropReplacedProxy).
func (p *Pipeline) registerStraySweep() {
	_ = p.d.Op.Every(JobStrayProxies, p.d.StrayProxySweep, p.sweepStrayProxies) // collected by Run
}

// strayCandidate is one proxy found by its state Secrets.
type strayCandidate struct {
	module *Module
	parent proxyset.Parent
	// tailnetName is the Tailnet its replicas were made in ("" the
	// operator's).
	tailnetName string
}

// sweepStrayProxies removes every proxy in the operator namespace whose
// parent is gone: its Pods, devices, auth keys and objects, as the parent's
// delete handler would have. Each one is logged as a warning.
func (p *Pipeline) sweepStrayProxies(ctx context.Context) error {
	candidates, err := p.proxiesByState(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, c := range candidates {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		gone, err := p.parentGone(ctx, c.module, c.parent)
		if err != nil || !gone {
			errs = append(errs, err)
			continue
		}
		be, err := p.strayBackend(ctx, c.tailnetName)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := p.deleteProxy(ctx, be, c.parent); err != nil {
			errs = append(errs, fmt.Errorf("remove the stray proxy %s: %w", c.parent.Names().Base, err))
			continue
		}
		p.d.Log.Warn("removed a stray proxy: its parent was deleted without the operator's cleanup (its finalizer was removed)",
			"proxy", c.parent.Names().Base, "kind", c.module.Kind, "parent", runtime.ObjectKey(c.parent.Namespace, c.parent.Name),
			"devices_deleted", be != nil)
	}
	return errors.Join(errs...)
}

// proxiesByState lists the proxies of registered modules that have a state
// Secret in the operator namespace, one per proxy, within the operator's
// watch scope. A proxy whose parent name did not fit a label (longer than 63
// characters) cannot be named from its labels and is left out.
func (p *Pipeline) proxiesByState(ctx context.Context) ([]strayCandidate, error) {
	ns := p.d.Settings.Namespace
	list, err := p.d.Kube.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: stateSelector()})
	if err != nil {
		return nil, fmt.Errorf("list the proxies' state Secrets in %s: %w", ns, err)
	}
	// The Tailnet a proxy's devices are in is on its config Secrets.
	configs, err := p.d.Kube.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(labels.Set{
		proxystate.LabelManaged: "true", proxystate.LabelSecretType: proxyset.SecretTypeConfig}).String()})
	if err != nil {
		return nil, fmt.Errorf("list the proxies' config Secrets in %s: %w", ns, err)
	}
	tailnetOf := map[string]string{}
	for _, c := range configs.Items {
		tailnetOf[c.Name] = c.Labels[LabelTailnet]
	}
	seen := map[string]bool{}
	var out []strayCandidate
	for _, s := range list.Items {
		l := s.Labels
		role := l[proxyset.LabelProxyRole]
		p.mu.Lock()
		m := p.modules[role]
		p.mu.Unlock()
		if m == nil || (!m.ClusterScoped && p.d.WatchNamespace != "" && l[proxystate.LabelParentNamespace] != p.d.WatchNamespace) {
			continue
		}
		parent := proxyset.Parent{Type: l[proxystate.LabelParentType], Namespace: l[proxystate.LabelParentNamespace],
			Name: l[proxystate.LabelParentName], Role: role, NameKey: m.NameKey}
		base := parent.Names().Base
		if _, ok := proxyset.OrdinalOf(base, s.Name); !ok || seen[base] {
			continue // a truncated parent name, or a replica already listed
		}
		seen[base] = true
		out = append(out, strayCandidate{module: m, parent: parent, tailnetName: tailnetOf[s.Name+"-config"]})
	}
	return out, nil
}

// parentGone reports whether the parent of a proxy is no longer in the API
// server (read from it, not a cache, so that a parent just made counts).
func (p *Pipeline) parentGone(ctx context.Context, m *Module, parent proxyset.Parent) (bool, error) {
	res := p.d.Dyn.Resource(m.Resource)
	var err error
	if m.ClusterScoped {
		_, err = res.Get(ctx, parent.Name, metav1.GetOptions{})
	} else {
		_, err = res.Namespace(parent.Namespace).Get(ctx, parent.Name, metav1.GetOptions{})
	}
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("read the parent of proxy %s: %w", parent.Names().Base, err)
	}
	return false, nil
}

// dropReplacedProxy deletes obj's proxy when it was made for an earlier
// object of the same name that left without the delete handler (see
// registerStraySweep): its StatefulSet selects the old UID's Pods, a field
// the API server does not let change. Its devices and keys go with it, as
// the old object's delete handler would have done; the pipeline then makes
// obj a proxy of its own.
func (p *Pipeline) dropReplacedProxy(ctx context.Context, m *Module, obj *unstructured.Unstructured) error {
	parent := m.parent(obj)
	replaced, err := p.ownedByAnother(ctx, parent.Names().Base, string(obj.GetUID()))
	if err != nil || !replaced {
		return err
	}
	be, err := p.cleanupBackend(ctx, m, obj)
	if err != nil {
		return err
	}
	p.d.Log.Warn("removed a stray proxy: made for an earlier object of the same name, deleted without the operator's cleanup (its finalizer was removed)",
		"proxy", parent.Names().Base, "kind", m.Kind, "parent", runtime.ObjectKey(parent.Namespace, parent.Name))
	return p.deleteProxy(ctx, be, parent)
}

// ownedByAnother reports whether the proxy's StatefulSet base selects the
// Pods of another parent than uid (the label proxyset.Render sets).
func (p *Pipeline) ownedByAnother(ctx context.Context, base, uid string) (bool, error) {
	ns := p.d.Settings.Namespace
	sts, err := p.d.Kube.AppsV1().StatefulSets(ns).Get(ctx, base, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("read StatefulSet %s/%s: %w", ns, base, err)
	}
	if sts.Spec.Selector == nil {
		return false, nil
	}
	owner, ok := sts.Spec.Selector.MatchLabels[proxystate.LabelApp]
	return ok && owner != uid, nil
}

// strayBackend is the backend through which a stray proxy's devices and
// keys are removed: its Tailnet's, or nil when that Tailnet object is gone
// (the devices stay there, as for a parent deleted after its Tailnet). A
// Tailnet not checked yet is an error: the next sweep tries again.
func (p *Pipeline) strayBackend(ctx context.Context, name string) (tailnet.Backend, error) {
	be, err := p.d.Tailnets.For(name)
	if err == nil {
		return be, nil
	}
	if name != "" && errors.Is(err, tailnet.ErrNoTailnet) {
		_, getErr := p.d.Dyn.Resource(resources.Tailnets).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(getErr) {
			return nil, nil
		}
	}
	return nil, fmt.Errorf("Tailnet %q: %w", name, err)
}
