package official

import (
	"context"
	"encoding/base64"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TakeSnapshot reads what the operator in operatorNS produced for parent:
// the parent's conditions and status, its Events, the objects labelled with
// it in operatorNS (with each Secret's keys), and its device (the MagicDNS
// name a state Secret records, and that device's tags from the tailnet API).
func (c *Cluster) TakeSnapshot(ctx context.Context, env TailnetEnv, parent *unstructured.Unstructured, operatorNS string) (Snapshot, error) {
	var s Snapshot
	live, err := c.Get(ctx, parent)
	if err != nil {
		return s, err
	}
	conds, _, _ := unstructured.NestedSlice(live.Object, "status", "conditions")
	for _, x := range conds {
		m, _ := x.(map[string]any)
		s.Conditions = append(s.Conditions, fmt.Sprintf("%v=%v/%v", m["type"], m["status"], m["reason"]))
	}
	ingress, _, _ := unstructured.NestedSlice(live.Object, "status", "loadBalancer", "ingress")
	s.Status = append(s.Status, LoadBalancerStatus(ingress)...)
	status, _, _ := unstructured.NestedMap(live.Object, "status")
	s.Status = append(s.Status, OtherStatus(status)...)
	events, err := c.Kube.CoreV1().Events(live.GetNamespace()).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.uid=" + string(live.GetUID())})
	if err != nil {
		return s, fmt.Errorf("events of %s: %w", live.GetName(), err)
	}
	for _, e := range events.Items {
		s.Events = append(s.Events, e.Type+"/"+e.Reason)
	}
	var kinds []string
	for _, gvr := range childKinds() {
		list, err := c.Dyn.Resource(gvr).Namespace(operatorNS).List(ctx, metav1.ListOptions{LabelSelector: parentSelector(live.GetNamespace(), live.GetName())})
		if err != nil {
			return s, fmt.Errorf("%s of %s: %w", gvr.Resource, live.GetName(), err)
		}
		for _, o := range list.Items {
			kinds = append(kinds, o.GetKind())
			if o.GetKind() != "Secret" {
				continue
			}
			data, _, _ := unstructured.NestedMap(o.Object, "data")
			s.SecretKeys = append(s.SecretKeys, SecretKeyList(data))
			if fqdn, ok := data["device_fqdn"].(string); ok && s.DeviceName == "" {
				s.DeviceName = decodeBase64(fqdn)
			}
		}
	}
	s.Children = CountKinds(kinds)
	if s.DeviceName != "" {
		devices, err := env.Devices(ctx)
		if err != nil {
			return s, err
		}
		for _, d := range devices {
			if strings.TrimSuffix(d.Name, ".") == strings.TrimSuffix(s.DeviceName, ".") {
				s.DeviceTags = slices.Sorted(slices.Values(d.Tags))
			}
		}
	}
	return s, nil
}

// decodeBase64 decodes a Secret's data value as read through the dynamic
// client; a value that is not base64 stays as it is.
func decodeBase64(s string) string {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return s
	}
	return string(b)
}

// settleQuiet is how long a snapshot must stay the same to count as
// settled: an operator writes conditions, status and Events in several
// steps after its proxy first serves (session 11's rows were read at the
// first success, before the last of them).
const settleQuiet = 5 * time.Second

// SettledSnapshot takes snapshots of parent every second until one has
// stayed the same for settleQuiet, and returns it with the time it took;
// after timeout it returns the last one and an error saying it kept
// changing.
func (c *Cluster) SettledSnapshot(ctx context.Context, env TailnetEnv, parent *unstructured.Unstructured, operatorNS string, timeout time.Duration) (Snapshot, time.Duration, error) {
	return settle(ctx, timeout, time.Second, settleQuiet, func() (Snapshot, error) {
		return c.TakeSnapshot(ctx, env, parent, operatorNS)
	}, fmt.Sprintf("the status of %s %s to settle", parent.GetKind(), parent.GetName()))
}

// settle calls take every interval until its result has not changed for
// quiet; see SettledSnapshot.
func settle(ctx context.Context, timeout, interval, quiet time.Duration, take func() (Snapshot, error), what string) (Snapshot, time.Duration, error) {
	start := time.Now()
	var last Snapshot
	var since time.Time
	err := Poll(ctx, timeout, interval, func() (bool, error) {
		s, err := take()
		if err != nil {
			return false, err
		}
		now := time.Now()
		if since.IsZero() || !reflect.DeepEqual(s, last) {
			last, since = s, now
		}
		return now.Sub(since) >= quiet, nil
	}, what)
	return last, time.Since(start), err
}
