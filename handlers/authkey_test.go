package handlers_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/internal/tailnet/tailnettest"
	"github.com/tailplane/tailplane/internal/testpoll"
)

// No auth key outlives its use: 20 Services are created and deleted while
// the operator is killed (its handlers cancelled mid-cycle, then a fresh
// operator started) at random points, and while the API mints three keys whose answer never reaches
// the operator (as if it had died right after the API minted them). Once
// everything settles, the only valid unused keys are those in the configs
// of proxies that have not logged in yet, and after the deletes there are
// none.
func TestAuthKeysNeverLeak(t *testing.T) {
	h := newHarness(t, nil)
	h.hardStop = true
	h.restart()
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	const n = 20
	mints := make(chan tailnettest.KeyRequest, 10*n)
	h.api.OnMint(func(k tailnettest.KeyRequest) {
		select {
		case mints <- k:
		default:
		}
	})
	h.api.DropMintResponses(3)
	for i := range n {
		h.createService(exposed(fmt.Sprintf("k%02d", i), nil))
	}
	// Two kills while keys are being minted, each right after a random mint.
	killAt := map[int]bool{}
	for len(killAt) < 2 {
		killAt[4+rng.IntN(n-4)] = true
	}
	seen := 0
	for kills := 0; kills < 2; {
		select {
		case k := <-mints:
			seen++
			if !strings.HasPrefix(k.Description, "tailplane ts-k") {
				t.Fatalf("key minted with description %q", k.Description)
			}
			if killAt[seen] {
				t.Logf("killing the operator after mint %d", seen)
				h.restart()
				kills++
			}
		case <-time.After(45 * time.Second):
			t.Fatalf("only %d keys minted", seen)
		}
	}
	keyOf := func(i int) (string, error) {
		cfg, err := h.proxyConfig("svc", fmt.Sprintf("k%02d", i))
		if err != nil {
			return "", err
		}
		if cfg.AuthKey == "" {
			return "", fmt.Errorf("k%02d: no key in the config", i)
		}
		return cfg.AuthKey, nil
	}
	for i := range n {
		testpoll.Until(t, settle, "key of every proxy", func() error { _, err := keyOf(i); return err })
	}
	// Half the proxies log in with their key.
	for i := 0; i < n; i += 2 {
		h.simulateLogin("svc", fmt.Sprintf("k%02d", i), fmt.Sprintf("nK%02d", i), fmt.Sprintf("%s-k%02d.tail1.ts.net", h.ns, i), "100.64.1.1")
	}
	// On retry: every key minted and never recorded was revoked; the valid
	// unused keys are exactly those the other half's configs carry.
	testpoll.Until(t, settle, "only the configs' keys are valid", func() error {
		var want []string
		for i := 1; i < n; i += 2 {
			k, err := keyOf(i)
			if err != nil {
				return err
			}
			want = append(want, k)
		}
		var got []string
		for _, k := range h.api.ValidUnusedKeys() {
			got = append(got, k.Key)
		}
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			return fmt.Errorf("valid unused keys %q, want the configs' %q (minted %d)", got, want, len(h.api.Keys()))
		}
		return nil
	})
	if len(h.api.Keys()) < n+3 {
		t.Fatalf("%d keys minted; the dropped answers should have cost 3 more than %d", len(h.api.Keys()), n)
	}

	// Delete everything; kill the operator once more after a random number
	// of Services are gone.
	for i := range n {
		if err := h.kube.CoreV1().Services(h.ns).Delete(h.ctx(), fmt.Sprintf("k%02d", i), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	killWhenLeft := 3 + rng.IntN(n-6)
	testpoll.Until(t, settle, fmt.Sprintf("at most %d Services left", killWhenLeft), func() error {
		if left := h.servicesLeft(); left > killWhenLeft {
			return fmt.Errorf("%d left", left)
		}
		return nil
	})
	t.Logf("killing the operator with %d Services left", h.servicesLeft())
	h.restart()
	testpoll.Until(t, settle, "every Service gone", func() error {
		if left := h.servicesLeft(); left > 0 {
			return fmt.Errorf("%d left", left)
		}
		return nil
	})
	if v := h.api.ValidUnusedKeys(); len(v) != 0 {
		t.Fatalf("%d of %d keys are still valid and unused: %+v", len(v), len(h.api.Keys()), v)
	}
	for i := 0; i < n; i += 2 {
		if !slices.Contains(h.api.Deleted(), fmt.Sprintf("nK%02d", i)) {
			t.Errorf("device nK%02d not deleted", i)
		}
	}
}

// A Service deleted before its proxy logged in takes its unused key with
// it: the key is revoked, not left valid.
func TestDeleteRevokesTheUnusedKey(t *testing.T) {
	h := newHarness(t, nil)
	h.createService(exposed("early", nil))
	testpoll.Until(t, settle, "proxy", func() error { return h.proxyExists("svc", "early") })
	cfg, err := h.proxyConfig("svc", "early")
	if err != nil || cfg.AuthKey == "" {
		t.Fatalf("config %+v %v", cfg, err)
	}
	keys := h.api.Keys()
	if len(keys) != 1 || keys[0].Description != proxyset.KeyDescription(h.names("svc", "early").Base, 0) {
		t.Fatalf("keys %+v", keys)
	}
	if err := h.kube.CoreV1().Services(h.ns).Delete(h.ctx(), "early", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testpoll.Until(t, settle, "proxy gone", func() error { return h.proxyGone("svc", "early") })
	if !slices.Contains(h.api.Revoked(), keys[0].ID) {
		t.Fatalf("key %s not revoked (revoked: %v)", keys[0].ID, h.api.Revoked())
	}
}

// servicesLeft counts the Services of the test namespace.
func (h *harness) servicesLeft() int {
	h.t.Helper()
	list, err := h.kube.CoreV1().Services(h.ns).List(h.ctx(), metav1.ListOptions{})
	if apierrors.IsNotFound(err) {
		return 0
	}
	if err != nil {
		h.t.Fatal(err)
	}
	return len(list.Items)
}
