//go:build headscale

package handlers_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tailplane/tailplane/handlers/lib/cluster"
	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/internal/headscaletest"
	"github.com/tailplane/tailplane/internal/syncbuf"
	"github.com/tailplane/tailplane/internal/tailnet"
	"github.com/tailplane/tailplane/internal/testpoll"
	"github.com/tailplane/tailplane/runtime"
)

// countingSweeper is the operator's real Headscale backend, counting the
// sweeps the pipeline runs.
type countingSweeper struct {
	*tailnet.Headscale
	sweeps atomic.Int32
}

func (c *countingSweeper) ExpireOrphanedKeys(ctx context.Context, before time.Time, inUse tailnet.KeysInUse) ([]tailnet.AuthKey, error) {
	c.sweeps.Add(1)
	return c.Headscale.ExpireOrphanedKeys(ctx, before, inUse)
}

// An operator that stopped between minting a proxy's auth key and writing
// it into the config Secret leaves a key that no Secret holds, and
// Headscale keeps no description to find it by. The next operator, on a
// real Headscale and a real API server, leaves it valid while it is younger
// than the grace period (a key in hand-over), then expires it and logs a
// warning naming it; the key its own proxy's config Secret holds stays valid
// once older than the grace period too.
func TestHeadscaleOrphanedKeysAreExpired(t *testing.T) {
	const grace = 12 * time.Second
	hs := headscaletest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	newBackend := func() *tailnet.Headscale {
		b, err := tailnet.NewHeadscale(tailnet.HeadscaleOptions{URL: hs["HEADSCALE_URL"], APIKey: hs["HEADSCALE_API_KEY"]})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// The operator that died: it minted the key, then stopped.
	orphan, err := newBackend().MintAuthKey(ctx, tailnet.KeyRequest{Tags: []string{"tag:k8s"}, Preauthorized: true,
		Description: proxyset.KeyDescription("ts-gone-abcd1234", 0)})
	if err != nil {
		t.Fatal(err)
	}
	minted := time.Now()

	var logs syncbuf.Buffer
	operator := &countingSweeper{Headscale: newBackend()}
	h := newHarness(t, nil)
	h.stop()
	h.control = func(tailnet.Backend) tailnet.Backend { return operator }
	h.adjustDeps = func(d *cluster.Deps) {
		d.OrphanKeySweep, d.OrphanKeyGrace = 200*time.Millisecond, grace
		d.Log = runtime.NewLogger(io.MultiWriter(&logs, testLogWriter()), false)
	}
	h.start()
	h.createService(exposed("web", nil))
	testpoll.Until(t, settle, "the proxy's config Secret with its auth key", func() error {
		cfg, err := h.proxyConfig("svc", "web")
		if err == nil && (cfg.AuthKey == "" || cfg.LoginServer != hs["HEADSCALE_URL"]) {
			err = fmt.Errorf("config %+v", cfg)
		}
		return err
	})
	recordedAt := time.Now()
	keys, err := operator.ListAuthKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(keys, func(k tailnet.AuthKey) bool {
		return k.Description == proxyset.KeyDescription(h.names("svc", "web").Base, 0)
	})
	if i < 0 {
		t.Fatalf("no key minted for the proxy: %+v", keys)
	}
	recorded := keys[i]
	valid := func(id string) error {
		keys, err := operator.ListAuthKeys(ctx)
		if err != nil {
			return err
		}
		i := slices.IndexFunc(keys, func(k tailnet.AuthKey) bool { return k.ID == id })
		if i < 0 || keys[i].Invalid {
			return fmt.Errorf("key %s expired or gone: %+v", id, keys)
		}
		return nil
	}

	young := operator.sweeps.Load()
	testpoll.Always(t, max(time.Until(minted.Add(grace-3*time.Second)), time.Second), "the orphan, younger than the grace period, stays valid", func() error { return valid(orphan.ID) })
	if n := operator.sweeps.Load() - young; n < 3 {
		t.Fatalf("%d sweeps while the orphan was young, want several", n)
	}
	testpoll.Until(t, grace+30*time.Second, "the orphan expired", func() error {
		if valid(orphan.ID) == nil {
			return errors.New("still valid")
		}
		return nil
	})
	// The sweep logs after Headscale answers, so the line can trail the expiry.
	testpoll.Until(t, 5*time.Second, "a warning naming the orphan in the operator's log", func() error {
		if out := logs.String(); !strings.Contains(out, "expired an orphaned auth key") || !strings.Contains(out, "key_id="+orphan.ID) {
			return fmt.Errorf("no warning naming the orphan %s in:\n%s", orphan.ID, out)
		}
		return nil
	})
	testpoll.Always(t, max(time.Until(recordedAt.Add(grace+time.Second)), time.Second), "the key in the proxy's config stays valid", func() error { return valid(recorded.ID) })
	if err := valid(recorded.ID); err != nil {
		t.Fatalf("the key in the proxy's config, older than the grace period: %v", err)
	}
}
