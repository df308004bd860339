package kubestate

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/tailplane/tailplane/internal/proxystate"
)

// SetRecentPeers writes recent_peers as a JSON list, patches the Secret
// only when the list changed, and a store loaded later (the next process)
// reads the list back.
func TestRecentPeers(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewSimpleClientset()
	s, err := New(ctx, cs, "ns", "proxy-0")
	if err != nil {
		t.Fatal(err)
	}
	if got := s.RecentPeers(); got != nil {
		t.Fatalf("RecentPeers of a new Secret = %v, want nil", got)
	}
	patches := func() int {
		n := 0
		for _, a := range cs.Actions() {
			if a.GetVerb() == "patch" {
				n++
			}
		}
		return n
	}
	set := func(peers ...string) {
		t.Helper()
		if err := s.SetRecentPeers(ctx, peers); err != nil {
			t.Fatal(err)
		}
	}
	set("100.64.0.2", "100.64.0.3")
	set("100.64.0.2", "100.64.0.3")
	if n := patches(); n != 1 {
		t.Fatalf("%d patches after writing the same list twice, want 1", n)
	}
	sec, err := cs.CoreV1().Secrets("ns").Get(ctx, "proxy-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(sec.Data[proxystate.KeyRecentPeers]), `["100.64.0.2","100.64.0.3"]`; got != want {
		t.Fatalf("%s = %s, want %s", proxystate.KeyRecentPeers, got, want)
	}
	set("100.64.0.3")
	set()
	if n := patches(); n != 3 {
		t.Fatalf("%d patches after two changes, want 3", n)
	}
	set("100.64.0.4")
	next, err := New(ctx, cs, "ns", "proxy-0")
	if err != nil {
		t.Fatal(err)
	}
	if got := next.RecentPeers(); len(got) != 1 || got[0] != "100.64.0.4" {
		t.Fatalf("the next process reads %v, want [100.64.0.4]", got)
	}
}
