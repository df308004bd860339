package device_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/tailplane/tailplane/handlers/lib/device"
	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/internal/proxystate"
)

func describe(k proxyset.Key) string { return k.Role + " " + k.Namespace + "/" + k.Name }

// woken records the parents Claims wakes.
type woken struct {
	mu    sync.Mutex
	names []string
}

func (w *woken) wake(parent proxyset.Key, _ time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.names = append(w.names, parent.Name)
}

func (w *woken) got() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.names...)
}

// Two parents claiming one hostname at once: both list the config Secrets
// at the same time (no claim holds the lock across the API call), and still
// exactly one gets the name; the other is woken once it is released.
func TestClaimRaceHasOneWinnerWithoutListingUnderTheLock(t *testing.T) {
	var inList sync.WaitGroup
	inList.Add(2)
	both := make(chan struct{})
	go func() { inList.Wait(); close(both) }()
	var lists atomic.Int32
	// The fake clientset runs its reactors under its own lock: the wait is
	// in front of it.
	kube := &listHook{Clientset: fake.NewClientset(), before: func() {
		if lists.Add(1) > 2 {
			return
		}
		inList.Done()
		select {
		case <-both:
		case <-time.After(5 * time.Second):
			t.Error("a claim listed config Secrets while the other waited: the List ran under the lock")
		}
	}}
	w := &woken{}
	c := &device.Claims{Kube: kube, Namespace: ns, Wake: w.wake}
	parents := []proxyset.Parent{
		{Type: "svc", Namespace: "a", Name: "web", Role: "ingress"},
		{Type: "svc", Namespace: "b", Name: "web", Role: "ingress"},
	}
	errs := make([]error, 2)
	var done sync.WaitGroup
	for i, p := range parents {
		done.Add(1)
		go func() {
			defer done.Done()
			errs[i] = c.Claim(context.Background(), p, []string{"web"}, describe)
		}()
	}
	done.Wait()
	winner := -1
	for i, err := range errs {
		if err == nil {
			if winner >= 0 {
				t.Fatal("both parents got hostname web")
			}
			winner = i
		} else if !strings.Contains(err.Error(), `hostname "web" is already used by ingress`) {
			t.Errorf("refusal: %v", err)
		}
	}
	if winner < 0 {
		t.Fatalf("no parent got hostname web: %v", errs)
	}
	c.Release(parents[winner])
	if got := w.got(); len(got) != 1 || got[0] != "web" {
		t.Errorf("woken %v, want the loser", got)
	}
	// Released: the other one gets it now (the lists no longer wait).
	if err := c.Claim(context.Background(), parents[1-winner], []string{"web"}, describe); err != nil {
		t.Errorf("after release: %v", err)
	}
}

// A hostname another parent's config Secret carries is refused, naming
// that parent; the parent's own config Secrets do not count.
func TestClaimSeesConfigSecretsOfOtherParents(t *testing.T) {
	mine := proxyset.Parent{Type: "svc", Namespace: "a", Name: "web", Role: "ingress"}
	theirs := proxyset.Parent{Type: "svc", Namespace: "b", Name: "db", Role: "egress"}
	withHost := func(p proxyset.Parent, h string) runtime.Object {
		s := config(p, 0, "")
		s.Labels[device.LabelHostname] = h
		s.Labels[proxystate.LabelManaged] = "true"
		return s
	}
	c := &device.Claims{Kube: fake.NewClientset(withHost(mine, "web"), withHost(theirs, "db")), Namespace: ns, Wake: (&woken{}).wake}
	if err := c.Claim(context.Background(), mine, []string{"web"}, describe); err != nil {
		t.Errorf("own hostname: %v", err)
	}
	err := c.Claim(context.Background(), mine, []string{"web", "db"}, describe)
	if err == nil || !strings.Contains(err.Error(), `hostname "db" is already used by egress b/db`) {
		t.Errorf("taken hostname: %v", err)
	}
}

// listHook is a clientset whose Secrets List calls before first.
type listHook struct {
	*fake.Clientset
	before func()
}

func (h *listHook) CoreV1() corev1client.CoreV1Interface {
	return hookedCore{h.Clientset.CoreV1(), h.before}
}

type hookedCore struct {
	corev1client.CoreV1Interface
	before func()
}

func (c hookedCore) Secrets(namespace string) corev1client.SecretInterface {
	return hookedSecrets{c.CoreV1Interface.Secrets(namespace), c.before}
}

type hookedSecrets struct {
	corev1client.SecretInterface
	before func()
}

func (s hookedSecrets) List(ctx context.Context, opts metav1.ListOptions) (*corev1.SecretList, error) {
	s.before()
	return s.SecretInterface.List(ctx, opts)
}
