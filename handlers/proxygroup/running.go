package proxygroup

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/tailplane/tailplane/crds/tailscale/v1alpha1"
	"github.com/tailplane/tailplane/handlers/lib/cluster"
	"github.com/tailplane/tailplane/handlers/lib/pipeline"
	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/internal/proxystate"
)

// replicaPod is one wanted replica with its current Pod (nil when there is
// none).
type replicaPod struct {
	pipeline.Replica
	Pod *corev1.Pod
}

// running reports whether the replica's current Pod runs the replica: the
// Pod is Ready (the proxy's readiness probe passes only once it is logged
// in, has applied a config and, hosting Tailscale Services, once control
// routes them to it) and its own process wrote the Pod's UID to the state
// Secret. A device left in the state Secret by a Pod that is gone or still
// restarting does not count, as in the official operator; nor, here, does
// a Pod that is shutting down (it stopped advertising and drains), even
// while its Ready condition has not caught up.
func (r replicaPod) running() bool {
	if r.Pod == nil || r.Pod.DeletionTimestamp != nil || r.State == nil || r.Device.ID == "" ||
		string(r.State.Data[proxystate.KeyPodUID]) != string(r.Pod.UID) {
		return false
	}
	return podIsReady(r.Pod)
}

func podIsReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// replicaPods reads the group's wanted replicas (from the API server, not a
// cache) and their Pods.
func (g *groups) replicaPods(ctx context.Context, pg *v1alpha1.ProxyGroup) ([]replicaPod, error) {
	proxy, err := g.p.ReadProxy(ctx, proxyset.Parent{Type: ParentType, Name: pg.Name, UID: pg.UID, Role: cluster.RoleProxyGroup}, replicaCount(pg))
	if err != nil {
		return nil, err
	}
	pods, err := g.d.Kube.CoreV1().Pods(g.d.Settings.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(proxyset.Parent{Type: ParentType, Name: pg.Name}.OfficialLabels()).String()})
	if err != nil {
		return nil, fmt.Errorf("list Pods of ProxyGroup %s: %w", pg.Name, err)
	}
	byName := map[string]*corev1.Pod{}
	for i := range pods.Items {
		byName[pods.Items[i].Name] = &pods.Items[i]
	}
	out := make([]replicaPod, 0, len(proxy.Replicas))
	for _, r := range proxy.Replicas {
		out = append(out, replicaPod{Replica: r, Pod: byName[r.Names.StateSecret]})
	}
	return out, nil
}

// runningDevices are the devices among serving whose replica runs (see
// replicaPod.running), in serving's order.
func runningDevices(replicas []replicaPod, serving []proxyset.Device) []proxyset.Device {
	running := map[string]bool{}
	for _, r := range replicas {
		if r.running() {
			running[r.Device.ID] = true
		}
	}
	var out []proxyset.Device
	for _, d := range serving {
		if running[d.ID] {
			out = append(out, d)
		}
	}
	return out
}
