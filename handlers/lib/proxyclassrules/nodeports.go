package proxyclassrules

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/tailplane/tailplane/crds/tailscale/v1alpha1"
)

// ValidateNodePorts checks a class's static endpoint port ranges against
// the cluster, which Validate cannot see: each range lies in the cluster's
// NodePort range (nodePortRange; nil when unknown), and no port is also in
// another ProxyClass's ranges (others: class name -> its ranges), since a
// node port serves one Service. Like the official operator, it reports the
// first problem found, with its message.
func ValidateNodePorts(pc *v1alpha1.ProxyClass, nodePortRange *v1alpha1.PortRange, others map[string][]v1alpha1.PortRange) field.ErrorList {
	se := pc.Spec.StaticEndpoints
	if se == nil || se.NodePort == nil {
		return nil
	}
	ranges := se.NodePort.Ports
	invalid := func(msg string) field.ErrorList {
		return field.ErrorList{field.TypeInvalid(field.NewPath("spec", "staticEndpoints", "nodePort", "ports"), RangesString(ranges), msg)}
	}
	if nodePortRange != nil {
		for _, r := range ranges {
			if !contains(*nodePortRange, r.Port) || !contains(*nodePortRange, end(r)) {
				return invalid(fmt.Sprintf("range %q is not within Cluster configured range %q", RangeString(r), RangeString(*nodePortRange)))
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(others)) {
		if name == pc.Name {
			continue
		}
		for _, r := range ranges {
			if slices.ContainsFunc(others[name], func(o v1alpha1.PortRange) bool { return overlap(o, r) }) {
				return invalid(fmt.Sprintf("port ranges for ProxyClass %q clash with existing ProxyClass %q", pc.Name, name))
			}
		}
	}
	return nil
}

// ClashesWith reports whether a ProxyClassReady message says the class's
// ports clash with those of the ProxyClass other (which, deleted or
// changed, may no longer clash).
func ClashesWith(message, other string) bool {
	return strings.Contains(message, fmt.Sprintf("clash with existing ProxyClass %q", other))
}

// RangeString is a range as the official operator writes it: "30000" or
// "30000-30010".
func RangeString(r v1alpha1.PortRange) string {
	if r.EndPort == 0 {
		return fmt.Sprint(r.Port)
	}
	return fmt.Sprintf("%d-%d", r.Port, r.EndPort)
}

// RangesString is ranges as the official operator writes them.
func RangesString(ranges []v1alpha1.PortRange) string {
	s := make([]string, len(ranges))
	for i, r := range ranges {
		s[i] = RangeString(r)
	}
	return strings.Join(s, ", ")
}

func contains(r v1alpha1.PortRange, port uint16) bool { return r.Port <= port && port <= end(r) }
