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

// SubnetRegistry is the machine-wide folder that records which cluster
// directory owns which /24 of PodRange, one file per subnet. Routes alone
// cannot say it: a stopped cluster removes its route but keeps its subnet for
// the next up, and a cluster started in between must not take it.
func SubnetRegistry() string { return filepath.Join(os.TempDir(), "devcluster-pod-subnets") }

// ClaimPodSubnet returns the cluster's pod subnet and makes it local: the one
// recorded in dir, or the first /24 of PodRange that no other cluster owns.
// dir must be absolute.
func ClaimPodSubnet(dir string) (netip.Prefix, error) {
	if b, err := os.ReadFile(filepath.Join(dir, podCIDRFile)); err == nil {
		p, err := netip.ParsePrefix(strings.TrimSpace(string(b)))
		if err != nil {
			return p, fmt.Errorf("%s: %w", podCIDRFile, err)
		}
		ok, owner, err := reserveSubnet(p, dir)
		if err != nil {
			return p, err
		}
		if !ok {
			return p, fmt.Errorf("pod subnet %s of this cluster is now used by the cluster in %s; stop and delete that one, or delete %s", p, owner, dir)
		}
		return p, ensureLocalRoute(p)
	}
	base := netip.MustParsePrefix(PodRange).Addr().As4()
	for i := 0; i < 256; i++ {
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{base[0], base[1], byte(i), 0}), 24)
		ok, _, err := reserveSubnet(p, dir)
		if err != nil {
			return p, err
		}
		if !ok {
			continue // another cluster's, running or stopped
		}
		// Recorded before routing: until then another cluster would see the
		// reservation as stale.
		if err := os.WriteFile(filepath.Join(dir, podCIDRFile), []byte(p.String()), 0o644); err != nil {
			return p, err
		}
		out, err := exec.Command("ip", "route", "add", "local", p.String(), "dev", "lo").CombinedOutput()
		if err != nil {
			_ = os.Remove(filepath.Join(dir, podCIDRFile))
			_ = os.Remove(subnetFile(p))
			if strings.Contains(string(out), "File exists") {
				continue // routed by something that does not use the registry
			}
			return p, fmt.Errorf("make pod subnet %s local (ip route add local %s dev lo; needs root): %v: %s", p, p, err, out)
		}
		return p, nil
	}
	return netip.Prefix{}, fmt.Errorf("no free /24 left in %s", PodRange)
}

func subnetFile(p netip.Prefix) string {
	return filepath.Join(SubnetRegistry(), strings.ReplaceAll(p.String(), "/", "_"))
}

// reserveSubnet records dir as p's owner unless another cluster directory
// that still exists and still names p owns it; it returns that owner.
func reserveSubnet(p netip.Prefix, dir string) (ok bool, owner string, err error) {
	if err := os.MkdirAll(SubnetRegistry(), 0o755); err != nil {
		return false, "", fmt.Errorf("pod subnet registry: %w", err)
	}
	path := subnetFile(p)
	for attempt := 0; attempt < 2; attempt++ {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err == nil {
			_, werr := f.WriteString(dir)
			if cerr := f.Close(); werr == nil {
				werr = cerr
			}
			return werr == nil, "", werr
		}
		if !os.IsExist(err) {
			return false, "", fmt.Errorf("pod subnet registry: %w", err)
		}
		b, err := os.ReadFile(path)
		if err != nil && !os.IsNotExist(err) {
			return false, "", fmt.Errorf("pod subnet registry: %w", err)
		}
		owner = string(b)
		if owner == dir {
			return true, "", nil
		}
		if ownerStillClaims(owner, p) {
			return false, owner, nil
		}
		// The owner's folder is gone or moved on: the entry is stale.
		_ = os.Remove(path)
	}
	return false, owner, nil
}

func ownerStillClaims(owner string, p netip.Prefix) bool {
	if owner == "" {
		return false
	}
	b, err := os.ReadFile(filepath.Join(owner, podCIDRFile))
	return err == nil && strings.TrimSpace(string(b)) == p.String()
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
