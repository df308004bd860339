package main

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tailplane/tailplane/internal/syncbuf"
)

// helm uninstall runs the chart's pre-delete hook: the operator with
// TAILPLANE_UNINSTALL=true deletes its own tailnet device (the node ID its
// state Secret holds) and then that Secret, and exits; run again with
// nothing left, it does nothing and succeeds.
func TestUninstallDeletesTheOperatorsDevice(t *testing.T) {
	h := newDeviceHarness(t, nil)
	op := h.start(t)
	probe := h.waitReady(t, op)
	if err := op.stop(t); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}
	nodeID, _ := probe["nodeID"].(string)
	uninstall := maps.Clone(h.env)
	uninstall[envUninstall] = "true"
	log := &syncbuf.Buffer{}
	if err := run(context.Background(), envOf(uninstall), log); err != nil {
		t.Fatalf("uninstall: %v; log:\n%s", err, log)
	}
	if deleted := h.api.Deleted(); !slices.Equal(deleted, []string{nodeID}) {
		t.Fatalf("devices deleted: %v, want the operator's %s; log:\n%s", deleted, nodeID, log)
	}
	if _, err := env.Clientset(t).CoreV1().Secrets(h.ns).Get(context.Background(), "operator", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("state Secret after uninstall: %v, want it deleted", err)
	}
	if !strings.Contains(log.String(), "deleted the operator's tailnet device") {
		t.Errorf("the log does not say the device was deleted:\n%s", log)
	}

	again := &syncbuf.Buffer{}
	if err := run(context.Background(), envOf(uninstall), again); err != nil {
		t.Fatalf("uninstall again: %v; log:\n%s", err, again)
	}
	if deleted := h.api.Deleted(); len(deleted) != 1 {
		t.Fatalf("a second uninstall deleted %v", deleted[1:])
	}
	uninstall[envUninstall] = "yes please"
	if err := run(context.Background(), envOf(uninstall), &syncbuf.Buffer{}); err == nil || !strings.Contains(err.Error(), envUninstall) {
		t.Fatalf("a bad %s: %v", envUninstall, err)
	}
}
