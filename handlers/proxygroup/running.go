package proxygroup

import (
	"github.com/tailplane/tailplane/crds/tailscale/v1alpha1"
	"github.com/tailplane/tailplane/handlers/lib/groupmember"
	"github.com/tailplane/tailplane/handlers/lib/opmetrics"
	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/internal/proxystate"
)

// running reports whether the replica's current Pod runs the replica: the
// Pod is Ready (the proxy's readiness probe passes only once it is logged
// in, has applied a config and, hosting Tailscale Services, once control
// routes them to it) and its own process wrote the Pod's UID to the state
// Secret. A device left in the state Secret by a Pod that is gone or still
// restarting does not count, as in the official operator; nor, here, does
// a Pod that is shutting down (it stopped advertising and drains), even
// while its Ready condition has not caught up.
func running(r groupmember.ReplicaPod) bool {
	if r.Pod == nil || r.Pod.DeletionTimestamp != nil || r.State == nil || r.Device.ID == "" ||
		string(r.State.Data[proxystate.KeyPodUID]) != string(r.Pod.UID) {
		return false
	}
	return groupmember.PodReady(r.Pod)
}

// runningDevices are the devices among serving whose replica runs (see
// running), in serving's order.
func runningDevices(replicas []groupmember.ReplicaPod, serving []proxyset.Device) []proxyset.Device {
	isRunning := map[string]bool{}
	for _, r := range replicas {
		if running(r) {
			isRunning[r.Device.ID] = true
		}
	}
	var out []proxyset.Device
	for _, d := range serving {
		if isRunning[d.ID] {
			out = append(out, d)
		}
	}
	return out
}

// observed is what the group's metrics record: its wanted replicas, the
// serving ones, and for each Tailscale Service a replica reports, how many
// running replicas advertise it.
func observed(pg *v1alpha1.ProxyGroup, replicas []groupmember.ReplicaPod, serving []proxyset.Device) opmetrics.ProxyGroup {
	o := opmetrics.ProxyGroup{Name: pg.Name, Desired: groupmember.Replicas(pg), Advertising: map[string]int{}}
	for _, d := range serving {
		o.Serving = append(o.Serving, d.ID)
	}
	for _, r := range replicas {
		for svc := range r.Device.Services {
			if _, ok := o.Advertising[svc]; !ok {
				o.Advertising[svc] = 0
			}
			if running(r) && r.Device.Advertises(svc) {
				o.Advertising[svc]++
			}
		}
	}
	return o
}
