package node

import (
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"sync"
)

// PodCIDR is where pod IPs come from. It is not loopback on purpose: the
// apiserver refuses loopback addresses in EndpointSlices ("may not be in the
// loopback range"), so the node makes this range local instead, with one
// "local" route on lo (AnyIP): every address in it can be bound and reached on
// this machine, just like 127.0.0.0/8. 198.18.0.0/15 is reserved for
// benchmarking, so it collides with no real network.
const PodCIDR = "198.18.0.0/16"

// EnsurePodRoute makes PodCIDR local. It is idempotent.
func EnsurePodRoute() error {
	out, err := exec.Command("ip", "route", "show", "table", "local", PodCIDR).CombinedOutput()
	if err == nil && strings.Contains(string(out), PodCIDR) {
		return nil
	}
	if out, err := exec.Command("ip", "route", "add", "local", PodCIDR, "dev", "lo").CombinedOutput(); err != nil {
		return fmt.Errorf("make pod range %s local (ip route add local %s dev lo; needs root): %v: %s", PodCIDR, PodCIDR, err, out)
	}
	return nil
}

// RemovePodRoute undoes EnsurePodRoute; a missing route is not an error.
func RemovePodRoute() error {
	out, err := exec.Command("ip", "route", "show", "table", "local", PodCIDR).CombinedOutput()
	if err != nil || !strings.Contains(string(out), PodCIDR) {
		return nil
	}
	if out, err := exec.Command("ip", "route", "del", "local", PodCIDR, "dev", "lo").CombinedOutput(); err != nil {
		return fmt.Errorf("remove pod route: %v: %s", err, out)
	}
	return nil
}

// ipam hands out pod IPs from PodCIDR, skipping .0 and .1.
type ipam struct {
	mu     sync.Mutex
	prefix netip.Prefix
	used   map[netip.Addr]string // ip -> pod UID
	next   netip.Addr
}

func newIPAM() *ipam {
	p := netip.MustParsePrefix(PodCIDR)
	return &ipam{prefix: p, used: map[netip.Addr]string{}, next: p.Addr().Next().Next()}
}

// claim gives uid the address want if it is free and in range (a resumed pod
// keeps its IP), otherwise the next free one.
func (a *ipam) claim(uid, want string) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for ip, owner := range a.used {
		if owner == uid {
			return ip.String(), nil
		}
	}
	if ip, err := netip.ParseAddr(want); err == nil && a.prefix.Contains(ip) {
		if _, taken := a.used[ip]; !taken {
			a.used[ip] = uid
			return ip.String(), nil
		}
	}
	start := a.next
	for {
		ip := a.next
		a.next = a.next.Next()
		if !a.prefix.Contains(a.next) {
			a.next = a.prefix.Addr().Next().Next()
		}
		if _, taken := a.used[ip]; !taken {
			a.used[ip] = uid
			return ip.String(), nil
		}
		if a.next == start {
			return "", fmt.Errorf("pod range %s is full", PodCIDR)
		}
	}
}

func (a *ipam) release(uid string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for ip, owner := range a.used {
		if owner == uid {
			delete(a.used, ip)
		}
	}
}
