package runtime_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tailplane/tailplane/internal/testpoll"
	"github.com/tailplane/tailplane/runtime"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func httpGet(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// /healthz reports probes, /readyz follows the informers, /metrics exposes
// queue depth and handler metrics; each address is a setting.
func TestHealthReadyMetrics(t *testing.T) {
	gvr := newCRD(t, false)
	ns := env.Namespace(t)
	s := testSettings()
	s.HealthAddress, s.MetricsAddress = freeAddr(t), freeAddr(t)
	op := newOperator(t, s)
	var failing atomic.Bool
	op.OnProbe("answer", func(context.Context) (any, error) {
		if failing.Load() {
			return nil, errors.New("broken")
		}
		return 42, nil
	})
	op.OnCreate(gvr, "h", func(_ context.Context, ev *runtime.Event) (any, error) {
		if ev.Retry == 0 {
			return nil, runtime.Temporary(errors.New("once"), 10*time.Millisecond)
		}
		return "ok", nil
	})
	start(t, op)
	create(t, gvr, widget(ns, "w1", nil, nil))
	testpoll.UntilTrue(t, 20*time.Second, "handled", func() bool { return nested(get(t, gvr, ns, "w1"), "status.h") == "ok" })
	health, metrics := "http://"+s.HealthAddress, "http://"+s.MetricsAddress
	if code, body := httpGet(health + "/readyz"); code != 200 {
		t.Fatalf("/readyz = %d %s", code, body)
	}
	if code, body := httpGet(health + "/healthz"); code != 200 || !strings.Contains(body, `"answer":42`) {
		t.Fatalf("/healthz = %d %s", code, body)
	}
	failing.Store(true)
	if code, body := httpGet(health + "/healthz"); code != 500 || !strings.Contains(body, "broken") {
		t.Fatalf("/healthz with a failing probe = %d %s", code, body)
	}
	code, body := httpGet(metrics + "/metrics")
	for _, want := range []string{"runtime_queue_depth", `runtime_handler_outcomes_total{handler="h",outcome="success"`, "runtime_handler_duration_seconds_bucket", `runtime_handler_retries_total{handler="h"`} {
		if code != 200 || !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s (status %d)", want, code)
		}
	}
	if code, _ := httpGet(metrics + "/healthz"); code != 404 {
		t.Errorf("health served on the metrics address: %d", code)
	}
}

// Handlers post Events through the recorder, and every log line of a
// handler carries the object's key.
func TestEventsAndObjectLogger(t *testing.T) {
	gvr := newCRD(t, false)
	ns := env.Namespace(t)
	var buf syncBuffer
	s := testSettings()
	s.Logger = runtime.NewLogger(&buf, true)
	op := newOperator(t, s)
	op.OnCreate(gvr, "talk", func(_ context.Context, ev *runtime.Event) (any, error) {
		ev.Log.Info("hello from handler")
		return nil, nil
	})
	start(t, op)
	create(t, gvr, widget(ns, "w1", nil, nil))
	testpoll.UntilTrue(t, 20*time.Second, "Handled event", func() bool {
		list, err := env.Clientset(t).CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, e := range list.Items {
			if e.Reason == runtime.ReasonHandled && e.InvolvedObject.Name == "w1" && strings.Contains(e.Message, "talk") {
				return true
			}
		}
		return false
	})
	wantKey := fmt.Sprintf("widgets.%s/%s/w1", gvr.Group, ns)
	found := false
	for _, line := range strings.Split(buf.String(), "\n") {
		if !strings.Contains(line, "w1") {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("not JSON: %q", line)
		}
		if rec["key"] != wantKey {
			t.Fatalf("line without the object key %q: %s", wantKey, line)
		}
		found = found || rec["msg"] == "hello from handler"
	}
	if !found {
		t.Fatalf("handler line missing from log:\n%s", buf.String())
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// A graceful shutdown lets the in-flight handler finish within the bound and
// writes its result before Run returns.
func TestGracefulShutdown(t *testing.T) {
	gvr := newCRD(t, false)
	ns := env.Namespace(t)
	s := testSettings()
	s.ShutdownTimeout = 5 * time.Second
	op := newOperator(t, s)
	inside := make(chan struct{})
	op.OnCreate(gvr, "slow", func(ctx context.Context, _ *runtime.Event) (any, error) {
		close(inside)
		select {
		case <-time.After(500 * time.Millisecond): // work that outlives the cancel
			return "finished", nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	r := start(t, op)
	create(t, gvr, widget(ns, "w1", nil, nil))
	<-inside
	began := time.Now()
	r.stop(t)
	if took := time.Since(began); took > 4*time.Second {
		t.Fatalf("shutdown took %s", took)
	}
	if got := nested(get(t, gvr, ns, "w1"), "status.slow"); got != "finished" {
		t.Fatalf("in-flight result not written before Run returned: %v", got)
	}
}

// With QuietSuccess a successful handler run posts no Event, and a retry
// still does.
func TestQuietSuccessPostsOnlyProblems(t *testing.T) {
	gvr := newCRD(t, false)
	ns := env.Namespace(t)
	s := testSettings()
	s.QuietSuccess = true
	op := newOperator(t, s)
	var handled atomic.Int32
	op.OnCreate(gvr, "quiet", func(_ context.Context, ev *runtime.Event) (any, error) {
		if ev.Object.GetName() == "fails" && ev.Retry == 0 {
			return nil, runtime.Temporary(errors.New("not yet"), 10*time.Millisecond)
		}
		handled.Add(1)
		return nil, nil
	})
	start(t, op)
	create(t, gvr, widget(ns, "fine", nil, nil))
	create(t, gvr, widget(ns, "fails", nil, nil))
	events := func() map[string][]string {
		list, err := env.Clientset(t).CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string][]string{}
		for _, e := range list.Items {
			out[e.InvolvedObject.Name] = append(out[e.InvolvedObject.Name], e.Reason)
		}
		return out
	}
	testpoll.UntilTrue(t, 20*time.Second, "both handled, the retry reported", func() bool {
		return handled.Load() == 2 && slices.Contains(events()["fails"], runtime.ReasonRetry)
	})
	testpoll.AlwaysTrue(t, time.Second, "no Handled Event", func() bool {
		e := events()
		return !slices.Contains(e["fine"], runtime.ReasonHandled) && !slices.Contains(e["fails"], runtime.ReasonHandled)
	})
}
