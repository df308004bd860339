package official

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"

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
	for _, x := range ingress {
		m, _ := x.(map[string]any)
		for _, k := range []string{"hostname", "ip"} {
			if v, ok := m[k].(string); ok {
				s.Status = append(s.Status, "loadBalancer.ingress."+k+"="+Shape(v))
			}
		}
		if ports, ok := m["ports"].([]any); ok {
			for _, p := range ports {
				pm, _ := p.(map[string]any)
				s.Status = append(s.Status, fmt.Sprintf("loadBalancer.ingress.ports=%v/%v", pm["port"], pm["protocol"]))
			}
		}
	}
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
