package handlers_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tailplane/tailplane/handlers/lib/cluster"
	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/handlers/service"
	"github.com/tailplane/tailplane/internal/proxystate"
	"github.com/tailplane/tailplane/internal/tailnet/tailnettest"
	"github.com/tailplane/tailplane/internal/testpoll"
)

// deleteWithoutCleanup deletes a Service while the operator is stopped and
// removes its finalizer, as another operator or a user stripping
// finalizers does: the Service leaves the API server and no delete
// handler of this operator ever runs for it.
func (h *harness) deleteWithoutCleanup(name string) {
	h.t.Helper()
	if err := h.kube.CoreV1().Services(h.ns).Delete(h.ctx(), name, metav1.DeleteOptions{}); err != nil {
		h.t.Fatal(err)
	}
	if _, err := h.kube.CoreV1().Services(h.ns).Patch(h.ctx(), name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		h.t.Fatal(err)
	}
	testpoll.Until(h.t, settle, "Service "+name+" gone", func() error {
		_, err := h.kube.CoreV1().Services(h.ns).Get(h.ctx(), name, metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there: %v", err)
		}
		return nil
	})
}

// A proxy whose parent left without the delete handler is a stray: the
// operator removes it with its device and keys when it starts (the parent
// went while it was down) and on its periodic sweep (a proxy of a parent
// that is not there, left by an earlier process), and leaves alone the
// proxies whose parents exist.
func TestStrayProxiesRemoved(t *testing.T) {
	h := newHarness(t, nil)
	h.exposedOnline("web", "nWEB", "100.64.0.7")
	h.exposedOnline("keep", "nKEEP", "100.64.0.8")

	// Parent gone while the operator was down: found at the start.
	h.stop()
	h.deleteWithoutCleanup("web")
	h.adjustDeps = func(d *cluster.Deps) { d.StrayProxySweep = 300 * time.Millisecond }
	h.start()
	testpoll.Until(t, settle, "stray proxy of web removed", func() error { return h.proxyGone("svc", "web") })
	if !slices.Contains(h.api.Deleted(), "nWEB") {
		t.Fatalf("the stray's device was not deleted through the API: %v", h.api.Deleted())
	}

	// A stray that appears while the operator runs: a proxy of a Service
	// that does not exist, with a device and an unused key.
	ghost := proxyset.Parent{Type: proxyset.ParentService, Namespace: h.ns, Name: "ghost", Role: service.Role}
	names := ghost.Names()
	labels := ghost.Labels()
	labels[proxystate.LabelSecretType] = proxyset.SecretTypeState
	h.api.AddDevice(tailnettest.Device{ID: "nGHOST", Name: h.ns + "-ghost.tail1.ts.net"})
	state := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: names.StateSecret, Namespace: h.opNS, Labels: labels},
		Data: map[string][]byte{proxystate.KeyDeviceID: []byte("nGHOST"), proxystate.KeyDeviceFQDN: []byte(h.ns + "-ghost.tail1.ts.net.")}}
	if _, err := h.kube.CoreV1().Secrets(h.opNS).Create(h.ctx(), state, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testpoll.Until(t, settle, "stray ghost proxy removed", func() error {
		if !slices.Contains(h.api.Deleted(), "nGHOST") {
			return fmt.Errorf("device not deleted yet: %v", h.api.Deleted())
		}
		_, err := h.kube.CoreV1().Secrets(h.opNS).Get(h.ctx(), names.StateSecret, metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("state Secret still there: %v", err)
		}
		return nil
	})

	// Sweeps ran with keep's proxy present: it is untouched.
	if err := h.proxyExists("svc", "keep"); err != nil {
		t.Fatalf("the proxy of a Service that exists was swept: %v", err)
	}
	if slices.Contains(h.api.Deleted(), "nKEEP") {
		t.Fatal("the device of a Service that exists was deleted")
	}
	h.wantCondition("keep", "True", "ProxyCreated", "ProxyCreated")
}

// A Service deleted without the delete handler and made again under the
// same name, while the operator was down, gets a proxy of its own: the old
// one's StatefulSet selects the old object's Pods (a field that cannot
// change), so the operator deletes it with the old device and makes a new
// one.
func TestReplacedParentGetsItsOwnProxy(t *testing.T) {
	h := newHarness(t, nil)
	h.exposedOnline("web", "nOLD", "100.64.0.7")

	h.stop()
	h.deleteWithoutCleanup("web")
	h.createService(exposed("web", nil))
	uid := h.service("web").UID
	h.start()

	testpoll.Until(t, settle, "a proxy for the new Service", func() error {
		sts, err := h.kube.AppsV1().StatefulSets(h.opNS).Get(h.ctx(), h.names("svc", "web").Base, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got := sts.Spec.Selector.MatchLabels[proxystate.LabelApp]; got != string(uid) {
			return fmt.Errorf("StatefulSet selects %q, want the new Service's %q", got, uid)
		}
		return nil
	})
	if !slices.Contains(h.api.Deleted(), "nOLD") {
		t.Fatalf("the old object's device was not deleted: %v", h.api.Deleted())
	}
	h.wantCondition("web", "False", "ProxyPending", "no Tailscale hostname known yet")
	h.simulateLogin("svc", "web", "nNEW", h.ns+"-web.tail1.ts.net", "100.64.0.9")
	h.wantCondition("web", "True", "ProxyCreated", "ProxyCreated")
}

// A proxy whose objects are deleted by hand (or by a tool cleaning up after
// its parent) while its parent still wants it is made again at once, every
// object of it: the operator otherwise skips re-applying objects it applied
// unchanged within the last minute.
func TestProxyObjectsDeletedByHandComeBack(t *testing.T) {
	h := newHarness(t, nil)
	h.exposedOnline("web", "nWEB", "100.64.0.7")
	n := h.names("svc", "web")
	ctx := h.ctx()
	if err := errors.Join(
		h.kube.AppsV1().StatefulSets(h.opNS).Delete(ctx, n.Base, metav1.DeleteOptions{}),
		h.kube.CoreV1().ServiceAccounts(h.opNS).Delete(ctx, n.Base, metav1.DeleteOptions{}),
		h.kube.RbacV1().Roles(h.opNS).Delete(ctx, n.Base, metav1.DeleteOptions{}),
		h.kube.RbacV1().RoleBindings(h.opNS).Delete(ctx, n.Base, metav1.DeleteOptions{}),
		h.kube.CoreV1().Secrets(h.opNS).Delete(ctx, n.ConfigSecret, metav1.DeleteOptions{}),
		h.kube.CoreV1().Secrets(h.opNS).Delete(ctx, n.StateSecret, metav1.DeleteOptions{}),
	); err != nil {
		t.Fatal(err)
	}
	// Well within the minute an unchanged apply is skipped for.
	testpoll.Until(t, 20*time.Second, "every object of the proxy again", func() error { return h.proxyExists("svc", "web") })
	h.wantCondition("web", "False", "ProxyPending", "no Tailscale hostname known yet")
}
