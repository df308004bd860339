package runtime_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/tailplane/tailplane/internal/testpoll"
	"github.com/tailplane/tailplane/runtime"
)

// Of several replicas exactly one is active, and a graceful shutdown hands
// over at once (ReleaseOnCancel) rather than after the lease expires.
func TestLeaderElection(t *testing.T) {
	gvr := newCRD(t, false)
	ns := env.Namespace(t)
	var handledBy [2]atomic.Int32
	ops := make([]*runtime.Operator, 2)
	cancels := make([]context.CancelFunc, 2)
	dones := make([]chan error, 2)
	for i := range ops {
		s := testSettings()
		s.LeaderElection = &runtime.LeaderElection{
			Namespace: ns, Name: "widgets", Identity: []string{"one", "two"}[i],
			LeaseDuration: 20 * time.Second, RenewDeadline: 15 * time.Second, RetryPeriod: 200 * time.Millisecond,
		}
		ops[i] = newOperator(t, s)
		ops[i].OnCreate(gvr, "h", func(context.Context, *runtime.Event) (any, error) { handledBy[i].Add(1); return nil, nil })
		ctx, cancel := context.WithCancel(context.Background())
		cancels[i], dones[i] = cancel, make(chan error, 1)
		go func() { dones[i] <- ops[i].Run(ctx) }()
		t.Cleanup(func() { cancel(); <-dones[i] })
		if i == 0 {
			testpoll.UntilTrue(t, 30*time.Second, "first replica leads", func() bool { return ops[0].Leading() && ops[0].Ready() })
		}
	}
	testpoll.AlwaysTrue(t, time.Second, "exactly one leader", func() bool { return ops[0].Leading() && !ops[1].Leading() && ops[1].Ready() })
	create(t, gvr, widget(ns, "w1", nil, nil))
	testpoll.UntilTrue(t, 20*time.Second, "handled by the leader", func() bool { return handledBy[0].Load() == 1 })

	began := time.Now()
	cancels[0]()
	if err := <-dones[0]; err != nil {
		t.Fatalf("leader Run: %v", err)
	}
	dones[0] <- nil // for the cleanup
	testpoll.UntilTrue(t, 10*time.Second, "second replica leads", func() bool { return ops[1].Leading() && ops[1].Ready() })
	if took := time.Since(began); took > 10*time.Second {
		t.Fatalf("hand-over took %s, lease not released", took)
	}
	create(t, gvr, widget(ns, "w2", nil, nil))
	testpoll.UntilTrue(t, 20*time.Second, "handled by the new leader", func() bool { return handledBy[1].Load() == 1 })
	if handledBy[0].Load() != 1 {
		t.Fatalf("old leader handled %d objects", handledBy[0].Load())
	}
}

// A startup hook that fails ends Run with its error and releases the Lease,
// rather than leaving a leader that handles nothing.
func TestFailedStartupHookReleasesTheLease(t *testing.T) {
	ns := env.Namespace(t)
	s := testSettings()
	s.LeaderElection = &runtime.LeaderElection{
		Namespace: ns, Name: "hooked", Identity: "one",
		LeaseDuration: 20 * time.Second, RenewDeadline: 15 * time.Second, RetryPeriod: 200 * time.Millisecond,
	}
	op := newOperator(t, s)
	op.OnStartup(func(context.Context) error { return errors.New("no tailnet") })
	done := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { done <- op.Run(ctx) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "no tailnet") {
			t.Fatalf("Run returned %v, want the hook's error", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run still blocked 30 s after its startup hook failed")
	}
	lease, err := env.Clientset(t).CoordinationV1().Leases(ns).Get(context.Background(), "hooked", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := lease.Spec.HolderIdentity; h != nil && *h != "" {
		t.Fatalf("the Lease is still held by %q", *h)
	}
}

// Handlers create children idempotently with server-side apply, adopted by
// their owner.
func TestApplyAndAdopt(t *testing.T) {
	gvr := newCRD(t, false)
	ns := env.Namespace(t)
	cms := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	op := newOperator(t, testSettings())
	op.OnCreate(gvr, "child", func(ctx context.Context, ev *runtime.Event) (any, error) {
		cm := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": ev.Object.GetName() + "-cfg"},
			"data":     map[string]any{"k": "v"},
		}}
		if err := runtime.Adopt(ev.Object, map[string]string{"example.com/parent": ev.Object.GetName()}, cm); err != nil {
			return nil, runtime.Permanent(err)
		}
		for range 2 { // applying twice is a no-op, not a conflict
			if _, err := op.Apply(ctx, cms, cm); err != nil {
				return nil, err
			}
		}
		return "applied", nil
	})
	start(t, op)
	create(t, gvr, widget(ns, "w1", nil, nil))
	testpoll.UntilTrue(t, 20*time.Second, "child applied", func() bool { return nested(get(t, gvr, ns, "w1"), "status.child") == "applied" })
	cm, err := env.Clientset(t).CoreV1().ConfigMaps(ns).Get(context.Background(), "w1-cfg", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkChild(t, cm, get(t, gvr, ns, "w1"))
}

func checkChild(t *testing.T, cm *corev1.ConfigMap, owner *unstructured.Unstructured) {
	t.Helper()
	refs := cm.OwnerReferences
	if len(refs) != 1 || refs[0].UID != owner.GetUID() || refs[0].Controller == nil || !*refs[0].Controller {
		t.Fatalf("owner references = %+v", refs)
	}
	if cm.Labels["example.com/parent"] != "w1" {
		t.Fatalf("labels = %v", cm.Labels)
	}
	if len(cm.ManagedFields) == 0 || cm.ManagedFields[0].Manager != "tailplane" || cm.ManagedFields[0].Operation != "Apply" {
		t.Fatalf("managed fields = %+v", cm.ManagedFields)
	}
}
