package groupmember

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/tailplane/tailplane/crds/tailscale/v1alpha1"
	"github.com/tailplane/tailplane/handlers/lib/cluster"
	"github.com/tailplane/tailplane/handlers/lib/pipeline"
	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/handlers/lib/resources"
	"github.com/tailplane/tailplane/handlers/lib/tsservice"
	"github.com/tailplane/tailplane/internal/tailnet"
	"github.com/tailplane/tailplane/runtime"
)

// Names shared by a group and its members, the official ones.
const (
	// AnnotationProxyGroup, on a member, names the ProxyGroup serving it.
	AnnotationProxyGroup = "tailscale.com/proxy-group"
	// ParentType is the parent type label of a ProxyGroup's children.
	ParentType = "proxygroup"
	// ReasonProxyGroupNotFound says a member names no existing ProxyGroup.
	ReasonProxyGroupNotFound = "ProxyGroupNotFound"
)

// defaultReplicas is the number of replicas when spec.replicas is unset (the
// official operator's default in code).
const defaultReplicas = 2

// GroupOf is the ProxyGroup an object names, "" for none.
func GroupOf(obj *unstructured.Unstructured) string {
	return obj.GetAnnotations()[AnnotationProxyGroup]
}

// Decode reads a ProxyGroup; an object that does not decode is never
// retried.
func Decode(obj *unstructured.Unstructured) (*v1alpha1.ProxyGroup, error) {
	var pg v1alpha1.ProxyGroup
	if err := cluster.FromUnstructured(obj, &pg); err != nil {
		return nil, runtime.Permanent(err)
	}
	pg.APIVersion, pg.Kind = v1alpha1.GroupVersion.String(), "ProxyGroup"
	return &pg, nil
}

// Read reads a ProxyGroup from the API server; nil when it does not exist.
func Read(ctx context.Context, d *cluster.Deps, name string) (*v1alpha1.ProxyGroup, error) {
	u, err := d.Dyn.Resource(resources.ProxyGroups).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read ProxyGroup %s: %w", name, err)
	}
	return Decode(u)
}

// Replicas is spec.replicas, defaultReplicas when unset.
func Replicas(pg *v1alpha1.ProxyGroup) int {
	if pg.Spec.Replicas == nil {
		return defaultReplicas
	}
	return max(int(*pg.Spec.Replicas), 0)
}

// available reports whether the group's status says at least one replica
// serves (ProxyGroupAvailable): members are served, and get an address,
// only then.
func available(pg *v1alpha1.ProxyGroup) bool {
	return meta.IsStatusConditionTrue(pg.Status.Conditions, v1alpha1.ProxyGroupAvailable)
}

// parent is the group as the parent of its proxy's objects.
func parent(pg *v1alpha1.ProxyGroup) proxyset.Parent {
	return proxyset.Parent{Type: ParentType, Name: pg.Name, UID: pg.UID, Role: cluster.RoleProxyGroup}
}

// Backend is the tailnet backend of group pg (spec.tailnet); a Tailnet
// that cannot be used is retried (its handler has the group, and so its
// members, handled again once it is ready).
func Backend(d *cluster.Deps, pg *v1alpha1.ProxyGroup) (tailnet.Backend, error) {
	be, err := d.Tailnets.For(pg.Spec.Tailnet)
	if err != nil {
		return nil, runtime.Temporary(fmt.Errorf("ProxyGroup %s: %w", pg.Name, err), pipeline.TailnetRetry)
	}
	return be, nil
}

// ReplicaPod is one wanted replica with its current Pod (nil when there is
// none).
type ReplicaPod struct {
	pipeline.Replica
	Pod *corev1.Pod
}

// ReplicaPods reads the group's wanted replicas (from the API server, not a
// cache) and their Pods.
func ReplicaPods(ctx context.Context, d *cluster.Deps, p *pipeline.Pipeline, pg *v1alpha1.ProxyGroup) ([]ReplicaPod, error) {
	proxy, err := p.ReadProxy(ctx, parent(pg), Replicas(pg))
	if err != nil {
		return nil, err
	}
	pods, err := d.Kube.CoreV1().Pods(d.Settings.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(proxyset.Parent{Type: ParentType, Name: pg.Name}.OfficialLabels()).String()})
	if err != nil {
		return nil, fmt.Errorf("list Pods of ProxyGroup %s: %w", pg.Name, err)
	}
	byName := map[string]*corev1.Pod{}
	for i := range pods.Items {
		byName[pods.Items[i].Name] = &pods.Items[i]
	}
	out := make([]ReplicaPod, 0, len(proxy.Replicas))
	for _, r := range proxy.Replicas {
		out = append(out, ReplicaPod{Replica: r, Pod: byName[r.Names.StateSecret]})
	}
	return out, nil
}

// PodReady reports whether p's Ready condition is True.
func PodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// OwnerOf is obj, of kind, as the owner of Tailscale Services.
func OwnerOf(kind string, obj *unstructured.Unstructured) tsservice.Owner {
	return tsservice.Owner{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: obj.GetUID()}
}

// SweepAll sweeps o's Tailscale Services out of every tailnet the operator
// can reach: o may have left a group of another tailnet.
func SweepAll(ctx context.Context, d *cluster.Deps, o tsservice.Owner) error {
	for _, be := range d.Tailnets.All() {
		if err := tsservice.Sweep(ctx, be, d.OperatorNodeID, o, ""); err != nil {
			return err
		}
	}
	return nil
}
