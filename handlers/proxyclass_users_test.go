package handlers_test

import (
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/tailplane/tailplane/internal/testpoll"
)

// A ProxyGroup that names a ProxyClass not there yet waits for it, and goes
// on as soon as the class is Ready, with nothing else touching the group
// (the ProxyClass module re-handles the groups that use a class).
func TestProxyGroupWaitsForItsProxyClass(t *testing.T) {
	h := newHarness(t, nil)
	class := "late-" + h.ns
	g := h.proxyGroup(`{"type":"ingress","replicas":1,"proxyClass":"` + class + `"}`)
	g.wantCondition("ProxyGroupReady", "False", "ProxyGroupCreating", class)
	if _, err := g.config(0); !apierrors.IsNotFound(err) {
		t.Fatalf("a replica was made before its ProxyClass exists: %v", err)
	}
	h.createProxyClass(class, "registry.example.com/proxy:late")
	testpoll.Until(t, settle, "the group's replica once its ProxyClass is Ready", func() error {
		_, err := g.config(0)
		return err
	})
}
