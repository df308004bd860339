package runtime_test

import (
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/tailplane/tailplane/runtime"
)

// freezer wraps a client transport so that a test can make the watch
// streams open so far stop delivering, the way a silently broken
// connection does.
type freezer struct {
	mu     sync.Mutex
	bodies []*frozenBody
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func (f *freezer) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if err != nil || req.URL.Query().Get("watch") != "true" {
			return resp, err
		}
		b := &frozenBody{ReadCloser: resp.Body, frozen: make(chan struct{}), closed: make(chan struct{})}
		resp.Body = b
		f.mu.Lock()
		f.bodies = append(f.bodies, b)
		f.mu.Unlock()
		return resp, nil
	})
}

// freezeAll freezes every watch stream opened so far and returns how many.
func (f *freezer) freezeAll() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, b := range f.bodies {
		b.freeze.Do(func() { close(b.frozen) })
	}
	n := len(f.bodies)
	f.bodies = nil
	return n
}

type frozenBody struct {
	io.ReadCloser
	freeze, close  sync.Once
	frozen, closed chan struct{}
}

// Read drops whatever arrives once frozen and blocks until Close.
func (b *frozenBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	select {
	case <-b.frozen:
		<-b.closed
		return 0, io.ErrUnexpectedEOF
	default:
		return n, err
	}
}

func (b *frozenBody) Close() error {
	b.close.Do(func() { close(b.closed) })
	return b.ReadCloser.Close()
}

// counterValue sums a counter of the operator's registry over the series
// that have a label with the given value ("" for all).
func counterValue(t *testing.T, op *runtime.Operator, name, labelValue string) float64 {
	t.Helper()
	mfs, err := op.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			match := labelValue == ""
			for _, l := range m.GetLabel() {
				match = match || l.GetValue() == labelValue
			}
			if match {
				sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
	}
	return sum
}
