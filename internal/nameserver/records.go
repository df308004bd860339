// Package nameserver is the in-cluster nameserver of a DNSConfig: it answers
// A and AAAA queries for the tailnet's MagicDNS names (under ts.net) from the
// records file the operator keeps current (the dnsrecords ConfigMap, mounted
// into the Pod), as the official k8s-nameserver does, so that workloads not
// on the tailnet can resolve those names through a CoreDNS stub domain.
//
// This file is the records format, shared with the operator
// (handlers/dnsconfig) that writes it; server.go answers queries. It knows
// nothing of Kubernetes.
package nameserver

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
)

// The official names of the records ConfigMap, its key, and the version of
// the format.
const (
	ConfigMapName = "dnsrecords"
	RecordsKey    = "records.json"
	Version       = "v1alpha1"
)

// Records is the content of records.json, the official format: fully
// qualified names (with or without the trailing dot) to addresses.
type Records struct {
	Version string              `json:"version"`
	IP4     map[string][]string `json:"ip4"`
	IP6     map[string][]string `json:"ip6,omitempty"`
}

// Encode returns r as records.json, with the version set. The output is
// stable (encoding/json sorts map keys), so an unchanged set of records is
// an unchanged ConfigMap.
func (r Records) Encode() (string, error) {
	r.Version = Version
	if r.IP4 == nil {
		r.IP4 = map[string][]string{}
	}
	b, err := json.Marshal(r)
	if err != nil {
		return "", fmt.Errorf("encode DNS records: %w", err)
	}
	return string(b), nil
}

// Table is the parsed records: lower-case names with the trailing dot, to
// addresses.
type Table struct {
	IP4 map[string][]netip.Addr
	IP6 map[string][]netip.Addr
}

// Parse reads records.json. Empty input is an empty table. A record with a
// bad name or address is skipped and reported in skipped (one bad record
// must not take every name down, as in the official nameserver); a bad
// document or another version is an error.
func Parse(data []byte) (t Table, skipped []string, err error) {
	t = Table{IP4: map[string][]netip.Addr{}, IP6: map[string][]netip.Addr{}}
	if len(strings.TrimSpace(string(data))) == 0 {
		return t, nil, nil
	}
	var r Records
	if err := json.Unmarshal(data, &r); err != nil {
		return Table{}, nil, fmt.Errorf("parse DNS records: %w", err)
	}
	if r.Version != Version {
		return Table{}, nil, fmt.Errorf("DNS records have version %q, this nameserver reads %q", r.Version, Version)
	}
	add := func(into map[string][]netip.Addr, name string, ips []string, want4 bool) {
		fqdn := Canonical(name)
		if fqdn == "." || strings.Contains(fqdn, "..") {
			skipped = append(skipped, fmt.Sprintf("%q is not a valid name", name))
			return
		}
		for _, s := range ips {
			a, err := netip.ParseAddr(s)
			if err != nil || a.Is4() != want4 || a.Zone() != "" {
				skipped = append(skipped, fmt.Sprintf("%q of %s is not an IPv%s address", s, name, map[bool]string{true: "4", false: "6"}[want4]))
				continue
			}
			into[fqdn] = append(into[fqdn], a)
		}
	}
	for name, ips := range r.IP4 {
		add(t.IP4, name, ips, true)
	}
	for name, ips := range r.IP6 {
		add(t.IP6, name, ips, false)
	}
	return t, skipped, nil
}

// Canonical returns name in lower case with one trailing dot: DNS names are
// case-insensitive, and queries carry the dot.
func Canonical(name string) string {
	return strings.ToLower(strings.TrimSuffix(name, ".")) + "."
}
