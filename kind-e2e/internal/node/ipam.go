package node

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// PodRange is where pod IPs come from. It is not loopback on purpose: the
// apiserver refuses loopback addresses in EndpointSlices ("may not be in the
// loopback range"), so the node makes its pod subnet local instead, with one
// "local" route on lo (AnyIP): every address in it can be bound and reached on
// this machine, just like 127.0.0.0/8. 198.18.0.0/15 is reserved for
// benchmarking, so it collides with no real network. Each cluster directory
// claims its own /24 of it, so several clusters can run side by side.
const PodRange = "198.18.0.0/16"

// podCIDRFile keeps a cluster's pod subnet across restarts.
const podCIDRFile = "pod-cidr"

// ClaimPodSubnet returns the cluster's pod subnet and makes it local: the one
// recorded in dir, or the first /24 of PodRange no other cluster routes.
func ClaimPodSubnet(dir string) (netip.Prefix, error) {
	if b, err := os.ReadFile(filepath.Join(dir, podCIDRFile)); err == nil {
		p, err := netip.ParsePrefix(strings.TrimSpace(string(b)))
		if err != nil {
			return p, fmt.Errorf("%s: %w", podCIDRFile, err)
		}
		return p, ensureLocalRoute(p)
	}
	base := netip.MustParsePrefix(PodRange).Addr().As4()
	for i := 0; i < 256; i++ {
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{base[0], base[1], byte(i), 0}), 24)
		out, err := exec.Command("ip", "route", "add", "local", p.String(), "dev", "lo").CombinedOutput()
		if err != nil {
			if strings.Contains(string(out), "File exists") {
				continue // another cluster's subnet
			}
			return p, fmt.Errorf("make pod subnet %s local (ip route add local %s dev lo; needs root): %v: %s", p, p, err, out)
		}
		return p, os.WriteFile(filepath.Join(dir, podCIDRFile), []byte(p.String()), 0o644)
	}
	return netip.Prefix{}, fmt.Errorf("no free /24 left in %s", PodRange)
}

func ensureLocalRoute(p netip.Prefix) error {
	out, err := exec.Command("ip", "route", "add", "local", p.String(), "dev", "lo").CombinedOutput()
	if err != nil && !strings.Contains(string(out), "File exists") {
		return fmt.Errorf("make pod subnet %s local (ip route add local %s dev lo; needs root): %v: %s", p, p, err, out)
	}
	return nil
}

// ReleasePodSubnet removes the local route of dir's pod subnet; the subnet
// stays recorded so that the cluster keeps its pod IPs when it resumes.
func ReleasePodSubnet(dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, podCIDRFile))
	if err != nil {
		return nil // never claimed
	}
	p := strings.TrimSpace(string(b))
	out, err := exec.Command("ip", "route", "del", "local", p, "dev", "lo").CombinedOutput()
	if err != nil && !strings.Contains(string(out), "No such process") {
		return fmt.Errorf("remove pod route %s: %v: %s", p, err, out)
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

func newIPAM(p netip.Prefix) *ipam {
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
			return "", fmt.Errorf("pod subnet %s is full", a.prefix)
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
