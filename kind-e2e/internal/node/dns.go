package node

import (
	"bufio"
	"net/netip"
	"os"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// hostResolvConf is the host's resolver file, what dnsPolicy Default gives.
var hostResolvConf = "/etc/resolv.conf"

// resolvConf is the pod's /etc/resolv.conf as the kubelet writes it
// (pkg/kubelet/network/dns): ClusterFirst (the default) names the cluster
// DNS, with the pod's namespace, svc and cluster domain searches before the
// host's and ndots:5; a host-network pod with ClusterFirst, or Default, gets
// the host's file; None gets only spec.dnsConfig, which is appended to the
// others (options of the same name replaced). Without a cluster DNS,
// ClusterFirst falls back to Default, as the kubelet does without
// clusterDNS. ok is false when the pod keeps the host's file unchanged.
func resolvConf(pod *corev1.Pod, clusterDNS netip.Addr, domain string) (content string, ok bool) {
	policy := pod.Spec.DNSPolicy
	switch {
	case policy == "" && pod.Spec.HostNetwork, policy == corev1.DNSClusterFirst && pod.Spec.HostNetwork:
		policy = corev1.DNSDefault
	case policy == "", policy == corev1.DNSClusterFirstWithHostNet:
		policy = corev1.DNSClusterFirst
	}
	if policy == corev1.DNSClusterFirst && !clusterDNS.IsValid() {
		policy = corev1.DNSDefault
	}
	if policy == corev1.DNSDefault && pod.Spec.DNSConfig == nil {
		return "", false
	}
	var servers, searches, options []string
	hostServers, hostSearches, hostOptions := readResolvConf(hostResolvConf)
	switch policy {
	case corev1.DNSClusterFirst:
		servers = []string{clusterDNS.String()}
		searches = append([]string{pod.Namespace + ".svc." + domain, "svc." + domain, domain}, hostSearches...)
		options = []string{"ndots:5"}
	case corev1.DNSDefault:
		servers, searches, options = hostServers, hostSearches, hostOptions
	}
	if c := pod.Spec.DNSConfig; c != nil {
		servers = dedup(append(servers, c.Nameservers...))
		searches = dedup(append(searches, c.Searches...))
		for _, o := range c.Options {
			opt := o.Name
			if o.Value != nil {
				opt += ":" + *o.Value
			}
			options = slices.DeleteFunc(options, func(have string) bool { n, _, _ := strings.Cut(have, ":"); return n == o.Name })
			options = append(options, opt)
		}
	}
	var b strings.Builder
	for _, s := range servers {
		b.WriteString("nameserver " + s + "\n")
	}
	if len(searches) > 0 {
		b.WriteString("search " + strings.Join(searches, " ") + "\n")
	}
	if len(options) > 0 {
		b.WriteString("options " + strings.Join(options, " ") + "\n")
	}
	return b.String(), true
}

// readResolvConf reads a resolv.conf's nameservers, searches and options.
func readResolvConf(path string) (servers, searches, options []string) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, nil
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || strings.HasPrefix(fields[0], "#") || strings.HasPrefix(fields[0], ";") {
			continue
		}
		switch fields[0] {
		case "nameserver":
			servers = append(servers, fields[1])
		case "search", "domain":
			searches = fields[1:]
		case "options":
			options = append(options, fields[1:]...)
		}
	}
	return servers, searches, options
}

func dedup(s []string) []string {
	var out []string
	for _, v := range s {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}
