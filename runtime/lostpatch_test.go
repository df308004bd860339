package runtime_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/tailplane/tailplane/internal/testpoll"
	"github.com/tailplane/tailplane/runtime"
)

// loseFirstPatch is a client transport that delivers the first PATCH of
// the object named name to the API server on a connection of its own
// (direct), then cuts the operator off (cut) and reports the request
// failed: the write landed but its answer was lost, and the operator's
// watch cannot tell it so either.
type loseFirstPatch struct {
	next, direct http.RoundTripper
	directHost   string // the API server's host:port, not the relay's
	name         string
	cut          func()
	done         atomic.Bool
}

func (l *loseFirstPatch) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodPatch || !strings.HasSuffix(req.URL.Path, "/"+l.name) || l.done.Load() {
		return l.next.RoundTrip(req)
	}
	l.done.Store(true)
	l.cut()
	req = req.Clone(req.Context())
	req.URL.Host, req.Host = l.directHost, ""
	resp, err := l.direct.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, errors.New("test: the patch to lose was refused: " + resp.Status)
	}
	return nil, errors.New("test: connection reset after the patch was sent")
}

// A patch that lands while its response is lost must not make the retry
// run the cycle's handlers again on the cached copy from before the patch:
// the retry first asks the API server whether the patch landed.
func TestLostPatchResponseDoesNotRerunHandlers(t *testing.T) {
	gvr := newCRD(t, false)
	ns := env.Namespace(t)
	cut, cfg := env.CutOff(t)
	admin := env.Config(t)
	direct, err := rest.TransportFor(admin)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(admin.Host)
	if err != nil {
		t.Fatal(err)
	}
	lose := &loseFirstPatch{direct: direct, directHost: u.Host, name: "w1", cut: cut.Start}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { lose.next = rt; return lose })
	op, err := runtime.New(cfg, testSettings())
	if err != nil {
		t.Fatal(err)
	}
	var handled counter
	op.OnCreate(gvr, "h", func(_ context.Context, ev *runtime.Event) (any, error) {
		handled.inc(ev.Object.GetName())
		return "done", nil
	})
	start(t, op)
	create(t, gvr, widget(ns, "w1", nil, nil))
	testpoll.UntilTrue(t, 20*time.Second, "w1's patch landed (answer lost)", func() bool {
		return nested(get(t, gvr, ns, "w1"), "status.h") == "done"
	})
	testpoll.AlwaysTrue(t, 3*time.Second, "no second run while the outcome is unknown", func() bool { return handled.get("w1") == 1 })
	cut.End()
	create(t, gvr, widget(ns, "w2", nil, nil))
	testpoll.UntilTrue(t, 30*time.Second, "w2 handled after the cut", func() bool {
		return nested(get(t, gvr, ns, "w2"), "status.h") == "done"
	})
	testpoll.AlwaysTrue(t, 2*time.Second, "w1 handled once", func() bool { return handled.get("w1") == 1 })
}
