package pipeline

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/tailplane/tailplane/handlers/lib/adoption"
	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/handlers/lib/resources"
	"github.com/tailplane/tailplane/handlers/lib/settings"
	"github.com/tailplane/tailplane/internal/proxystate"
	"github.com/tailplane/tailplane/internal/tailnet"
	"github.com/tailplane/tailplane/runtime"
)

// LabelAdoptedFrom is on a state Secret that holds a device taken over from
// the official operator until the official proxy's objects are all deleted:
// the name of the official state Secret. An adoption cut off in between
// (a crash) is finished by the next operator from it.
const LabelAdoptedFrom = "tailplane.dev/adopted-from"

// ReasonAdopted is the Event posted on a parent whose device Tailplane took
// over from the official operator's proxy.
const ReasonAdopted = "AdoptedOfficialProxy"

// adoptRetry is how often a parent checks whether the official proxy's Pods
// have stopped: the official device is off the tailnet meanwhile, so this is
// part of the parent's outage.
const adoptRetry = 250 * time.Millisecond

// officialIndex remembers, from one listing at the operator's start, the
// parents the official operator left a proxy for (or whose adoption was
// cut off), so that no other parent pays an API call for adoption. Official
// proxies made after the start are not seen: the two operators must not
// serve the same parents at once (docs/migration.md).
type officialIndex struct {
	mu      sync.Mutex
	loaded  bool
	parents map[string]bool // officialKey
}

// officialKey is "<type>/<namespace label>/<name label>".
func officialKey(typ, namespace, name string) string {
	return typ + "/" + namespace + "/" + proxyset.TruncateLabelValue(name)
}

// has reports whether parent may have an official proxy, listing the
// operator namespace once.
func (p *Pipeline) hasOfficial(ctx context.Context, parent proxyset.Parent) (bool, error) {
	x := &p.official
	x.mu.Lock()
	defer x.mu.Unlock()
	if !x.loaded {
		found, err := p.listOfficialParents(ctx)
		if err != nil {
			return false, err
		}
		x.parents, x.loaded = found, true
	}
	return x.parents[officialKey(parent.Type, parent.Namespace, parent.Name)], nil
}

// forgetOfficial notes that parent's adoption is finished.
func (p *Pipeline) forgetOfficial(parent proxyset.Parent) {
	p.official.mu.Lock()
	delete(p.official.parents, officialKey(parent.Type, parent.Namespace, parent.Name))
	p.official.mu.Unlock()
}

// listOfficialParents lists the official operator's Secrets and
// StatefulSets and Tailplane's state Secrets of unfinished adoptions.
func (p *Pipeline) listOfficialParents(ctx context.Context) (map[string]bool, error) {
	ns := p.d.Settings.Namespace
	notOurs := "tailscale.com/managed=true,!" + proxyset.LabelProxyRole
	out := map[string]bool{}
	add := func(l map[string]string) {
		if l[proxystate.LabelParentName] != "" {
			out[officialKey(l[proxystate.LabelParentType], l[proxystate.LabelParentNamespace], l[proxystate.LabelParentName])] = true
		}
	}
	for _, sel := range []string{notOurs, LabelAdoptedFrom} {
		list, err := p.d.Kube.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return nil, fmt.Errorf("list the official operator's Secrets in %s: %w", ns, err)
		}
		for _, s := range list.Items {
			add(s.Labels)
		}
	}
	sets, err := p.d.Kube.AppsV1().StatefulSets(ns).List(ctx, metav1.ListOptions{LabelSelector: notOurs})
	if err != nil {
		return nil, fmt.Errorf("list the official operator's StatefulSets in %s: %w", ns, err)
	}
	for _, s := range sets.Items {
		add(s.Labels)
	}
	return out, nil
}

// adoptStep is what adoptOfficial decided for a parent's cycle.
type adoptStep struct {
	// waiting, when set, makes the parent wait: nothing is applied.
	waiting string
	// replicas, when positive, is how many replicas the cycle applies: the
	// official replicas of the ordinals from there on still serve.
	replicas int
}

// adoptOfficial takes over the proxy the official operator left for obj, if
// any (settings.AdoptOn), one replica at a time from ordinal 0: it stops
// the official replica's Pod, moves its device state into the state Secret
// of Tailplane's replica of the same ordinal (adoption.Carried) and deletes
// the official replica's Secrets; the cycle then applies Tailplane's
// replicas up to that one, and the next official replica is stopped only
// once Tailplane's replica before it is Ready, so that a group always has a
// replica serving. A single proxy's Pod is stopped at once (grace
// removedProxyGrace); a group's drains with its own grace period (the
// official ingress replicas unadvertise their Tailscale Services first).
// When the last replica moved, the official objects left are deleted. A
// dry run (settings.AdoptDryRun) changes nothing and makes the parent wait.
func (p *Pipeline) adoptOfficial(ctx context.Context, m *Module, obj *unstructured.Unstructured, parent proxyset.Parent, be tailnet.Backend) (adoptStep, error) {
	mode := p.d.Settings.AdoptOfficial
	if mode == settings.AdoptOff {
		return adoptStep{}, nil
	}
	if has, err := p.hasOfficial(ctx, parent); err != nil || !has {
		return adoptStep{}, err
	}
	secrets := p.d.Kube.CoreV1().Secrets(p.d.Settings.Namespace)
	list, err := secrets.List(ctx, metav1.ListOptions{LabelSelector: adoption.Selector(parent).String()})
	if err != nil {
		return adoptStep{}, fmt.Errorf("list the official operator's Secrets of %s: %w", p.describe(parent.Key()), err)
	}
	replicas := adoption.Find(parent, list.Items)
	if mode == settings.AdoptDryRun {
		return p.dryRun(ctx, parent, replicas)
	}
	key := runtime.ObjectKey(obj.GetNamespace(), obj.GetName())
	if len(replicas) == 0 {
		if stopping, err := p.stopOfficialPods(ctx, parent); err != nil || stopping {
			p.d.Op.Enqueue(m.Resource, key, adoptRetry)
			return adoptStep{waiting: waitingForOfficialPods}, err
		}
		if err := p.deleteOfficial(ctx, parent); err != nil {
			return adoptStep{}, err
		}
		p.forgetOfficial(parent)
		return adoptStep{}, nil
	}
	if err := p.orphanOfficialSets(ctx, parent); err != nil {
		return adoptStep{}, err
	}
	r := replicas[0]
	if r.Ordinal > 0 {
		ready, err := p.replicaReady(ctx, parent, r.Ordinal-1)
		if err != nil || !ready {
			p.d.Op.Enqueue(m.Resource, key, time.Second)
			return adoptStep{replicas: r.Ordinal}, err
		}
	}
	var grace *int64
	if r.Ordinal == 0 && len(replicas) == 1 {
		g := removedProxyGrace
		grace = &g
	}
	stopped, err := p.stopOfficialPod(ctx, r.State.Name, grace)
	if err != nil || !stopped {
		p.d.Op.Enqueue(m.Resource, key, adoptRetry)
		if r.Ordinal == 0 {
			return adoptStep{waiting: waitingForOfficialPods}, err
		}
		return adoptStep{replicas: r.Ordinal}, err
	}
	// Read again: the stopped process may have written its state last.
	state, err := secrets.Get(ctx, r.State.Name, metav1.GetOptions{})
	if err != nil {
		return adoptStep{}, fmt.Errorf("read the official operator's state Secret %s: %w", r.State.Name, err)
	}
	r.State = state
	took, err := p.takeOver(ctx, parent, r, be)
	if err != nil {
		return adoptStep{}, err
	}
	// A proxy Tailplane handed back has its official Secrets under
	// Tailplane's names (handback.go): those are kept.
	ours := parent.Names().Replica(r.Ordinal)
	for _, name := range []string{r.State.Name, r.State.Name + "-config"} {
		if name == ours.StateSecret || name == ours.ConfigSecret {
			continue
		}
		if err := p.deleteOfficialObject(ctx, officialObject{"Secret", resources.Secrets, name}); err != nil {
			return adoptStep{}, err
		}
	}
	if took {
		msg := fmt.Sprintf("took over device %s from the official operator's proxy", r.Describe())
		p.d.Log.Info("adopted a replica of the official operator's proxy", "parent", key, "kind", m.Kind, "ordinal", r.Ordinal, "device", r.Describe())
		p.d.Post(obj, corev1.EventTypeNormal, ReasonAdopted, msg)
	}
	if len(replicas) > 1 {
		p.d.Op.Enqueue(m.Resource, key, adoptRetry)
		return adoptStep{replicas: r.Ordinal + 1}, nil
	}
	if err := p.deleteOfficial(ctx, parent); err != nil {
		return adoptStep{}, err
	}
	p.forgetOfficial(parent)
	return adoptStep{}, nil
}

// waitingForOfficialPods is the message of a parent whose first official
// replica is stopping.
const waitingForOfficialPods = "taking over the official operator's proxy: waiting for its Pods to stop"

// dryRun is the step of a dry run: the parent waits with what adoption
// would do, or goes on when there is nothing official.
func (p *Pipeline) dryRun(ctx context.Context, parent proxyset.Parent, replicas []adoption.Replica) (adoptStep, error) {
	leftovers, err := p.officialObjects(ctx, parent)
	if err != nil || len(replicas) == 0 && len(leftovers) == 0 {
		return adoptStep{}, err
	}
	var names []string
	for _, o := range leftovers {
		names = append(names, o.kind+" "+o.name)
	}
	return adoptStep{waiting: adoption.DryRun(replicas, names)}, nil
}

// replicaReady reports whether the Pod of Tailplane's replica ordinal of
// parent's proxy is Ready.
func (p *Pipeline) replicaReady(ctx context.Context, parent proxyset.Parent, ordinal int) (bool, error) {
	name := parent.Names().Replica(ordinal).StateSecret // named like the Pod
	pod, err := p.d.Kube.CoreV1().Pods(p.d.Settings.Namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read Pod %s: %w", name, err)
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue, nil
		}
	}
	return false, nil
}

// takeOver moves r's device state into Tailplane's state Secret of the same
// ordinal, marked LabelAdoptedFrom until the official objects are gone. A
// replica that never logged in has nothing to move. When Tailplane's
// replica already has a device of its own, the official device is a second
// one under the same name: it is deleted. It reports whether the device is
// now Tailplane's.
func (p *Pipeline) takeOver(ctx context.Context, parent proxyset.Parent, r adoption.Replica, be tailnet.Backend) (bool, error) {
	if !r.HasIdentity() {
		return false, nil
	}
	ns := p.d.Settings.Namespace
	name := parent.Names().Replica(r.Ordinal).StateSecret
	secrets := p.d.Kube.CoreV1().Secrets(ns)
	ours, err := secrets.Get(ctx, name, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return false, fmt.Errorf("read Secret %s: %w", name, err)
	}
	l := parent.Labels()
	l[proxystate.LabelSecretType] = proxyset.SecretTypeState
	l[LabelAdoptedFrom] = proxyset.TruncateLabelValue(r.State.Name)
	if err == nil && name == r.State.Name {
		// Handed back by Tailplane (handback.go): the official Secret is
		// Tailplane's by name, and becomes it again by its labels.
		ours.Labels = l
		if _, err := secrets.Update(ctx, ours, metav1.UpdateOptions{FieldManager: adoptionManager}); err != nil {
			return false, fmt.Errorf("label Secret %s as Tailplane's again: %w", name, err)
		}
		return true, nil
	}
	if err == nil && len(ours.Data["_machinekey"]) > 0 {
		if string(ours.Data[proxystate.KeyDeviceID]) == r.Device.ID {
			if _, handedBack := ours.Labels[LabelHandedBackTo]; handedBack {
				// A group replica's own state Secret a hand-back kept for
				// the release's last minutes: Tailplane's again, and no
				// longer the Deployment's to take away.
				ours.Labels, ours.OwnerReferences = l, nil
				if _, err := secrets.Update(ctx, ours, metav1.UpdateOptions{FieldManager: adoptionManager}); err != nil {
					return false, fmt.Errorf("label Secret %s as Tailplane's again: %w", name, err)
				}
			}
			return true, nil // moved by an adoption cut off before its clean-up
		}
		if be != nil && r.Device.ID != "" {
			if err := be.DeleteDevice(ctx, r.Device.ID); err != nil {
				return false, fmt.Errorf("tailnet API: delete the official operator's device %s of %s: %w", r.Device.ID, name, err)
			}
			p.d.Log.Warn("deleted the official operator's device: Tailplane's replica already had its own", "device", r.Describe(), "replica", name)
		}
		return false, nil
	}
	data := adoption.Carried(r.State.Data)
	if apierrors.IsNotFound(err) {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: l}, Data: data}
		if _, err := secrets.Create(ctx, s, metav1.CreateOptions{FieldManager: adoptionManager}); err != nil {
			return false, fmt.Errorf("create Secret %s with the official operator's device state: %w", name, err)
		}
		return true, nil
	}
	maps.Copy(ours.Labels, l)
	if ours.Data == nil {
		ours.Data = map[string][]byte{}
	}
	maps.Copy(ours.Data, data)
	if _, err := secrets.Update(ctx, ours, metav1.UpdateOptions{FieldManager: adoptionManager}); err != nil {
		return false, fmt.Errorf("write the official operator's device state into Secret %s: %w", name, err)
	}
	return true, nil
}

// adoptionManager is the field manager of the state adoption writes.
const adoptionManager = "tailplane-adoption"
