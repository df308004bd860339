package official

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// Snapshot is what one operator produced for one parent object (a Service
// or an Ingress) once its proxy served: read from the API and the tailnet,
// and normalised so that the two operators' snapshots compare (values that
// differ on every run, such as tailnet IPs, become their shape).
type Snapshot struct {
	// Conditions are the parent's status.conditions as "Type=Status/Reason".
	Conditions []string
	// Status are the parent's other status fields as "path=value".
	Status []string
	// Events are the Events about the parent as "Type/Reason".
	Events []string
	// Children are the kinds of the objects made for the parent (labelled
	// with it as tailscale.com/parent-resource), as "Kind xN".
	Children []string
	// SecretKeys are the data keys of each Secret among the children,
	// sorted, one entry per Secret ("k1,k2,...").
	SecretKeys []string
	// DeviceName is the device's MagicDNS name; DeviceTags its tags.
	DeviceName string
	DeviceTags []string
	// TailscaleService summarizes the Tailscale Service a ProxyGroup member
	// is served as (SummarizeService); "" for other parents.
	TailscaleService string
}

// CompatRow is one line of the compatibility table.
type CompatRow struct {
	Case, Property      string
	Official, Tailplane string
}

// Same says whether both operators produced the same.
func (r CompatRow) Same() bool { return r.Official == r.Tailplane }

// Compare lays the two snapshots of one case side by side, one row per
// property.
func Compare(caseName string, official, tailplane Snapshot) []CompatRow {
	row := func(prop string, o, t []string) CompatRow {
		return CompatRow{Case: caseName, Property: prop, Official: list(o), Tailplane: list(t)}
	}
	rows := []CompatRow{
		row("status conditions", official.Conditions, tailplane.Conditions),
		row("status fields", official.Status, tailplane.Status),
		row("Events", official.Events, tailplane.Events),
		row("objects created", official.Children, tailplane.Children),
		row("Secret keys", official.SecretKeys, tailplane.SecretKeys),
		row("device name", []string{official.DeviceName}, []string{tailplane.DeviceName}),
		row("device tags", official.DeviceTags, tailplane.DeviceTags),
	}
	if official.TailscaleService != "" || tailplane.TailscaleService != "" {
		rows = append(rows, row("Tailscale Service", []string{official.TailscaleService}, []string{tailplane.TailscaleService}))
	}
	return rows
}

// list is a sorted, de-duplicated, "; "-joined list, or "(none)".
func list(xs []string) string {
	s := slices.Clone(xs)
	s = slices.DeleteFunc(s, func(x string) bool { return x == "" })
	slices.Sort(s)
	s = slices.Compact(s)
	if len(s) == 0 {
		return "(none)"
	}
	return strings.Join(s, "; ")
}

// CompatTable renders rows as a Markdown table; a row whose values differ
// is marked.
func CompatTable(rows []CompatRow) string {
	var b strings.Builder
	b.WriteString("| case | property | official v1.102.5 | Tailplane | same |\n|---|---|---|---|---|\n")
	for _, r := range rows {
		same := "yes"
		if !r.Same() {
			same = "**differs**"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", r.Case, r.Property, cell(r.Official), cell(r.Tailplane), same)
	}
	return b.String()
}

func cell(s string) string { return "`" + strings.ReplaceAll(s, "|", `\|`) + "`" }

// Shape normalises one status value: a tailnet address becomes its family
// (they differ on every run), anything else stays.
func Shape(v string) string {
	if a, err := netip.ParseAddr(v); err == nil {
		if a.Is4() {
			return "<IPv4>"
		}
		return "<IPv6>"
	}
	return v
}

// LoadBalancerStatus lists status.loadBalancer.ingress (as read through the
// dynamic client) as "loadBalancer.ingress[i].field=value", each entry by
// its index: one entry with a hostname and an IP is another shape than an
// entry for each (clients read ingress[0].ip).
func LoadBalancerStatus(ingress []any) []string {
	var out []string
	for i, x := range ingress {
		m, _ := x.(map[string]any)
		prefix := fmt.Sprintf("loadBalancer.ingress[%d].", i)
		for _, k := range []string{"hostname", "ip", "ipMode"} {
			if v, ok := m[k].(string); ok {
				out = append(out, prefix+k+"="+Shape(v))
			}
		}
		if ports, ok := m["ports"].([]any); ok {
			for _, p := range ports {
				pm, _ := p.(map[string]any)
				out = append(out, fmt.Sprintf("%sports=%v/%v", prefix, pm["port"], pm["protocol"]))
			}
		}
	}
	return out
}

// OtherStatus lists the status fields that neither the conditions nor
// LoadBalancerStatus cover (a ProxyGroup's devices, say) as "path=value",
// lists by index, each value by its Shape.
func OtherStatus(status map[string]any) []string {
	var out []string
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, y := range x {
				if path == "" && (k == "conditions" || k == "loadBalancer") {
					continue
				}
				p := k
				if path != "" {
					p = path + "." + k
				}
				walk(p, y)
			}
		case []any:
			for i, y := range x {
				walk(fmt.Sprintf("%s[%d]", path, i), y)
			}
		default:
			out = append(out, fmt.Sprintf("%s=%s", path, Shape(fmt.Sprint(x))))
		}
	}
	walk("", status)
	slices.Sort(out)
	return out
}

// CountKinds turns a list of kinds into "Kind xN" entries.
func CountKinds(kinds []string) []string {
	n := map[string]int{}
	for _, k := range kinds {
		n[k]++
	}
	out := make([]string, 0, len(n))
	for k, c := range n {
		out = append(out, fmt.Sprintf("%s x%d", k, c))
	}
	slices.Sort(out)
	return out
}

// SecretKeyList is one Secret's data keys, sorted and comma-joined.
func SecretKeyList[V any](data map[string]V) string {
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return strings.Join(keys, ",")
}
