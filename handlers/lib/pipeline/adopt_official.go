package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tailplane/tailplane/handlers/lib/adoption"
	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/handlers/lib/resources"
	"github.com/tailplane/tailplane/handlers/lib/tsservice"
	"github.com/tailplane/tailplane/internal/proxystate"
)

// The official proxies' objects: finding, stopping and deleting them
// (adopt.go takes their devices over).

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

// officialCertObjects lists the certificate Secrets, Roles and
// RoleBindings the official operator made for group parent's Tailscale
// Services (tsservice.OfficialCertSelector).
func (p *Pipeline) officialCertObjects(ctx context.Context, parent proxyset.Parent) ([]officialObject, error) {
	sel := tsservice.OfficialCertSelector + ",tailscale.com/proxy-group=" + parent.Name
	var out []officialObject
	for _, k := range []struct {
		kind string
		gvr  schema.GroupVersionResource
	}{{"Secret", resources.Secrets}, {"Role", resources.Roles}, {"RoleBinding", resources.RoleBindings}} {
		list, err := p.d.Dyn.Resource(k.gvr).Namespace(p.d.Settings.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return nil, fmt.Errorf("list the official operator's certificate %ss of %s: %w", k.kind, p.describe(parent.Key()), err)
		}
		for _, o := range list.Items {
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

// orphanOfficialSets deletes the official StatefulSets of parent, leaving
// their Pods running: adoptOfficial stops them one at a time.
func (p *Pipeline) orphanOfficialSets(ctx context.Context, parent proxyset.Parent) error {
	sets, err := p.listOfficial(ctx, resources.StatefulSets, parent)
	if err != nil {
		return err
	}
	orphan := metav1.DeletePropagationOrphan
	for _, s := range sets {
		err := p.d.Dyn.Resource(resources.StatefulSets).Namespace(p.d.Settings.Namespace).Delete(ctx, s.GetName(), metav1.DeleteOptions{PropagationPolicy: &orphan})
		if ignoreNotFound(err) != nil {
			return fmt.Errorf("delete the official operator's StatefulSet %s/%s: %w", p.d.Settings.Namespace, s.GetName(), err)
		}
	}
	return nil
}

// stopOfficialPod deletes the official Pod name (with grace seconds; nil:
// its own grace period) and reports whether its processes have stopped.
func (p *Pipeline) stopOfficialPod(ctx context.Context, name string, grace *int64) (bool, error) {
	pods := p.d.Kube.CoreV1().Pods(p.d.Settings.Namespace)
	pod, err := pods.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("read the official operator's Pod %s: %w", name, err)
	}
	u, err := kruntime.DefaultUnstructuredConverter.ToUnstructured(pod)
	if err != nil {
		return false, err
	}
	if processesStopped(unstructured.Unstructured{Object: u}) {
		return true, nil
	}
	if pod.DeletionTimestamp == nil || grace != nil && (pod.DeletionGracePeriodSeconds == nil || *pod.DeletionGracePeriodSeconds > *grace) {
		if err := ignoreNotFound(pods.Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: grace})); err != nil {
			return false, fmt.Errorf("delete the official operator's Pod %s: %w", name, err)
		}
	}
	return false, nil
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

// deleteOfficial deletes every object of parent's official proxy (of a
// group, also its Tailscale Services' certificate Secrets, Roles and
// RoleBindings, whose certificates Tailplane's shared certificate Secrets
// started with), then the LabelAdoptedFrom mark of Tailplane's state
// Secrets.
func (p *Pipeline) deleteOfficial(ctx context.Context, parent proxyset.Parent) error {
	objs, err := p.officialObjects(ctx, parent)
	if err != nil {
		return err
	}
	if parent.Namespace == "" {
		certs, err := p.officialCertObjects(ctx, parent)
		if err != nil {
			return err
		}
		objs = append(objs, certs...)
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
