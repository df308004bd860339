package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

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
	add := func(items []metav1.ObjectMeta) {
		for _, m := range items {
			l := m.Labels
			if l[proxystate.LabelParentName] != "" {
				out[officialKey(l[proxystate.LabelParentType], l[proxystate.LabelParentNamespace], l[proxystate.LabelParentName])] = true
			}
		}
	}
	for _, sel := range []string{notOurs, LabelAdoptedFrom} {
		list, err := p.d.Kube.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return nil, fmt.Errorf("list the official operator's Secrets in %s: %w", ns, err)
		}
		for _, s := range list.Items {
			add([]metav1.ObjectMeta{s.ObjectMeta})
		}
	}
	sets, err := p.d.Kube.AppsV1().StatefulSets(ns).List(ctx, metav1.ListOptions{LabelSelector: notOurs})
	if err != nil {
		return nil, fmt.Errorf("list the official operator's StatefulSets in %s: %w", ns, err)
	}
	for _, s := range sets.Items {
		add([]metav1.ObjectMeta{s.ObjectMeta})
	}
	return out, nil
}

// adoptOfficial takes over the proxy the official operator left for obj, if
// any (settings.AdoptOn): it stops the official Pods, moves each replica's
// device state into the state Secret of Tailplane's replica of the same
// ordinal (adoption.Carried), then deletes the official objects. A message
// means the parent waits: its official Pods are still stopping, or this is a
// dry run (settings.AdoptDryRun), which changes nothing.
func (p *Pipeline) adoptOfficial(ctx context.Context, m *Module, obj *unstructured.Unstructured, parent proxyset.Parent, be tailnet.Backend) (string, error) {
	mode := p.d.Settings.AdoptOfficial
	if mode == settings.AdoptOff {
		return "", nil
	}
	if has, err := p.hasOfficial(ctx, parent); err != nil || !has {
		return "", err
	}
	ns := p.d.Settings.Namespace
	sel := adoption.Selector(parent).String()
	list, err := p.d.Kube.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return "", fmt.Errorf("list the official operator's Secrets of %s: %w", p.describe(parent.Key()), err)
	}
	replicas := adoption.Find(parent, list.Items)
	leftovers, err := p.officialObjects(ctx, parent)
	if err != nil {
		return "", err
	}
	if mode == settings.AdoptDryRun {
		if len(replicas) == 0 && len(leftovers) == 0 {
			return "", nil
		}
		var names []string
		for _, o := range leftovers {
			names = append(names, o.kind+" "+o.name)
		}
		return adoption.DryRun(replicas, names), nil
	}
	if stopping, err := p.stopOfficialPods(ctx, parent); err != nil || stopping {
		if stopping {
			p.d.Op.Enqueue(m.Resource, runtime.ObjectKey(obj.GetNamespace(), obj.GetName()), adoptRetry)
			return "taking over the official operator's proxy: waiting for its Pods to stop", nil
		}
		return "", err
	}
	// Read again: the stopped Pods may have written their state last.
	if list, err = p.d.Kube.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: sel}); err != nil {
		return "", fmt.Errorf("list the official operator's Secrets of %s: %w", p.describe(parent.Key()), err)
	}
	var adopted []string
	for _, r := range adoption.Find(parent, list.Items) {
		took, err := p.takeOver(ctx, parent, r, be)
		if err != nil {
			return "", err
		}
		if took {
			adopted = append(adopted, r.Describe())
		}
	}
	if err := p.deleteOfficial(ctx, parent); err != nil {
		return "", err
	}
	p.forgetOfficial(parent)
	if len(adopted) > 0 {
		msg := fmt.Sprintf("took over device %s from the official operator's proxy", strings.Join(adopted, "; "))
		p.d.Log.Info("adopted the official operator's proxy", "parent", runtime.ObjectKey(parent.Namespace, parent.Name), "kind", m.Kind, "devices", strings.Join(adopted, "; "))
		p.d.Post(obj, corev1.EventTypeNormal, ReasonAdopted, msg)
	}
	return "", nil
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
	if err == nil && len(ours.Data["_machinekey"]) > 0 {
		if string(ours.Data[proxystate.KeyDeviceID]) == r.Device.ID {
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
	l := parent.Labels()
	l[proxystate.LabelSecretType] = proxyset.SecretTypeState
	l[LabelAdoptedFrom] = proxyset.TruncateLabelValue(r.State.Name)
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

// officialObject is one object of an official proxy.
type officialObject struct {
	kind string
	gvr  schema.GroupVersionResource
	name string
}

// officialKinds are the kinds of the official proxies' objects in the
// operator namespace, in deletion order (StatefulSets first, so that no
// Pod is restarted with state that is about to go).
var officialKinds = []struct {
	kind string
	gvr  schema.GroupVersionResource
}{
	{"StatefulSet", resources.StatefulSets}, {"Service", resources.Services}, {"Secret", resources.Secrets},
	{"ConfigMap", resources.ConfigMaps}, {"ServiceAccount", resources.ServiceAccounts},
	{"Role", resources.Roles}, {"RoleBinding", resources.RoleBindings},
}

// officialObjects lists every object of parent's official proxy, in
// deletion order (StatefulSets first). Of the Secrets only the replicas'
// config and state ones: the official ProxyGroups' certificate Secrets are
// left (docs/migration.md).
func (p *Pipeline) officialObjects(ctx context.Context, parent proxyset.Parent) ([]officialObject, error) {
	var out []officialObject
	for _, k := range officialKinds {
		found, err := p.listOfficial(ctx, k.gvr, parent)
		if err != nil {
			return nil, err
		}
		for _, o := range found {
			if t := o.GetLabels()[proxystate.LabelSecretType]; k.kind == "Secret" && t != "" && t != proxyset.SecretTypeState && t != proxyset.SecretTypeConfig {
				continue
			}
			out = append(out, officialObject{kind: k.kind, gvr: k.gvr, name: o.GetName()})
		}
	}
	return out, nil
}

// listOfficial lists the objects of resource gvr of parent's official
// proxy in the operator namespace.
func (p *Pipeline) listOfficial(ctx context.Context, gvr schema.GroupVersionResource, parent proxyset.Parent) ([]unstructured.Unstructured, error) {
	list, err := p.d.Dyn.Resource(gvr).Namespace(p.d.Settings.Namespace).List(ctx, metav1.ListOptions{LabelSelector: adoption.Selector(parent).String()})
	if err != nil {
		return nil, fmt.Errorf("list the official operator's %s of %s: %w", gvr.Resource, p.describe(parent.Key()), err)
	}
	var out []unstructured.Unstructured
	for _, o := range list.Items {
		if adoption.Belongs(o.GetLabels(), parent) {
			out = append(out, o)
		}
	}
	return out, nil
}

// stopOfficialPods deletes the official StatefulSets of parent and their
// Pods; it reports whether Pods are still stopping.
func (p *Pipeline) stopOfficialPods(ctx context.Context, parent proxyset.Parent) (bool, error) {
	sets, err := p.listOfficial(ctx, resources.StatefulSets, parent)
	if err != nil {
		return false, err
	}
	official := map[string]bool{}
	for _, s := range sets {
		official[s.GetName()] = true
		if err := p.deleteOfficialObject(ctx, officialObject{"StatefulSet", resources.StatefulSets, s.GetName()}); err != nil {
			return false, err
		}
	}
	sel := adoption.Selector(parent).String()
	ofOfficialSet := func(name string) bool {
		i := strings.LastIndexByte(name, '-')
		return i > 0 && official[name[:i]]
	}
	if err := p.stopPods(ctx, sel, ofOfficialSet); err != nil {
		return false, err
	}
	pods, err := p.listOfficial(ctx, resources.Pods, parent)
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(pods, func(pod unstructured.Unstructured) bool { return !processesStopped(pod) }), nil
}

// processesStopped reports whether none of pod's containers runs any more:
// the Pod has ended, or every container's last state is terminated. That
// is a second sooner than the Pod leaving the API server (after the kubelet
// tore its volumes down), and is all that matters: no process holds the
// node key any more.
func processesStopped(pod unstructured.Unstructured) bool {
	if phase, _, _ := unstructured.NestedString(pod.Object, "status", "phase"); phase == "Succeeded" || phase == "Failed" {
		return true
	}
	statuses, _, _ := unstructured.NestedSlice(pod.Object, "status", "containerStatuses")
	inits, _, _ := unstructured.NestedSlice(pod.Object, "status", "initContainerStatuses")
	if len(statuses) == 0 {
		// Never started (not scheduled, say): no process to wait for.
		return len(inits) == 0
	}
	for _, c := range append(statuses, inits...) {
		cs, _ := c.(map[string]any)
		if _, terminated, _ := unstructured.NestedMap(cs, "state", "terminated"); !terminated {
			return false
		}
	}
	return true
}

// deleteOfficial deletes every object of parent's official proxy, then the
// LabelAdoptedFrom mark of Tailplane's state Secrets.
func (p *Pipeline) deleteOfficial(ctx context.Context, parent proxyset.Parent) error {
	objs, err := p.officialObjects(ctx, parent)
	if err != nil {
		return err
	}
	var errs []error
	for _, o := range objs {
		errs = append(errs, p.deleteOfficialObject(ctx, o))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	secrets := p.d.Kube.CoreV1().Secrets(p.d.Settings.Namespace)
	marked, err := secrets.List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(parent.Labels()).String() + "," + LabelAdoptedFrom})
	if err != nil {
		return fmt.Errorf("list the adopted state Secrets of %s: %w", p.describe(parent.Key()), err)
	}
	body, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{LabelAdoptedFrom: nil}}})
	for _, s := range marked.Items {
		if _, err := secrets.Patch(ctx, s.Name, types.MergePatchType, body, metav1.PatchOptions{}); ignoreNotFound(err) != nil {
			return fmt.Errorf("unmark the adopted state Secret %s: %w", s.Name, err)
		}
	}
	return nil
}

func (p *Pipeline) deleteOfficialObject(ctx context.Context, o officialObject) error {
	bg := metav1.DeletePropagationBackground
	err := p.d.Dyn.Resource(o.gvr).Namespace(p.d.Settings.Namespace).Delete(ctx, o.name, metav1.DeleteOptions{PropagationPolicy: &bg})
	if ignoreNotFound(err) != nil {
		return fmt.Errorf("delete the official operator's %s %s/%s: %w", o.kind, p.d.Settings.Namespace, o.name, err)
	}
	return nil
}
