package tailnet

import (
	"context"
	"testing"
	"time"
)

// A grant from "*" to a tag, set through the API before the nodes join,
// reaches the tagged node's WhoIs of an untagged (user) device: the
// kube-apiserver ProxyGroup's e2e setup.
func TestGrantFromEveryoneToTagForAUserDevice(t *testing.T) {
	tn := startWithPolicy(t, noApprovers)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := client0(t, tn).PolicyFile().Set(ctx, `{
		"autoApprovers": {"services": {"tag:k8s": ["tag:k8s"]}},
		"grants": [{"src": ["*"], "dst": ["tag:k8s"],
			"app": {"tailscale.com/cap/kubernetes": [{"impersonate": {"groups": ["readers"]}}]}}],
	}`, ""); err != nil {
		t.Fatal(err)
	}
	rep := join(ctx, t, tn, "rep", "tag:k8s")
	user := join(ctx, t, tn, "user")
	waitCaps(ctx, t, "the replica's WhoIs of the user device", rep, addrsOf(ctx, t, user), map[string][]string{
		string(capK8s): {`{"impersonate":{"groups":["readers"]}}`},
	})
}
