package node

import (
	"net/netip"
	"os"
	"testing"
)

func TestIPAM(t *testing.T) {
	a := newIPAM(netip.MustParsePrefix("198.18.7.0/30"))
	ip1, err := a.claim("pod-1", "")
	if err != nil || ip1 != "198.18.7.2" {
		t.Fatalf("first claim = %q, %v", ip1, err)
	}
	if again, _ := a.claim("pod-1", ""); again != ip1 {
		t.Errorf("a pod keeps its IP: got %q", again)
	}
	ip2, err := a.claim("pod-2", "")
	if err != nil || ip2 != "198.18.7.3" {
		t.Fatalf("second claim = %q, %v", ip2, err)
	}
	if _, err := a.claim("pod-3", ""); err == nil {
		t.Errorf("a full subnet must refuse")
	}
	a.release("pod-1")
	if ip, err := a.claim("pod-3", "198.18.7.2"); err != nil || ip != "198.18.7.2" {
		t.Errorf("a resumed pod gets its wanted free IP: %q, %v", ip, err)
	}
}

// A stopped cluster keeps its subnet: a cluster started while it is down must
// take another one, or both would hand out the same pod IPs when it resumes.
func TestStoppedClusterKeepsItsPodSubnet(t *testing.T) {
	first, second := t.TempDir(), t.TempDir()
	p1, err := ClaimPodSubnet(first)
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	t.Cleanup(func() { _ = ReleasePodSubnet(first) })
	if err := ReleasePodSubnet(first); err != nil { // down
		t.Fatalf("release: %v", err)
	}
	p2, err := ClaimPodSubnet(second)
	if err != nil {
		t.Fatalf("claim while the first is down: %v", err)
	}
	t.Cleanup(func() { _ = ReleasePodSubnet(second) })
	if p2 == p1 {
		t.Fatalf("the second cluster took %s, the stopped first cluster's subnet", p2)
	}
	if again, err := ClaimPodSubnet(first); err != nil || again != p1 { // up
		t.Fatalf("resume = %s, %v; want %s", again, err, p1)
	}
}

// Once a cluster's folder is gone its subnet is free again.
func TestDeletedClusterFreesItsPodSubnet(t *testing.T) {
	gone := t.TempDir()
	p, err := ClaimPodSubnet(gone)
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	if err := ReleasePodSubnet(gone); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(gone); err != nil {
		t.Fatal(err)
	}
	next := t.TempDir()
	ok, owner, err := reserveSubnet(p, next)
	if err != nil || !ok {
		t.Fatalf("reserve %s after its cluster was deleted = %v (owner %q), %v", p, ok, owner, err)
	}
	t.Cleanup(func() { _ = os.Remove(subnetFile(p)) })
}
