package official

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Side is one of the two operators and the classes it serves.
type Side struct {
	// Name is "official" or "Tailplane".
	Name string
	// Namespace is the operator's (and its proxies') namespace.
	Namespace string
	// IngressClass and LoadBalancerClass are the classes it serves.
	IngressClass, LoadBalancerClass string
}

// Sides are the two operators of the run.
func Sides() [2]Side {
	return [2]Side{
		{Name: "official", Namespace: OfficialNamespace, IngressClass: OfficialClass, LoadBalancerClass: OfficialClass},
		{Name: "Tailplane", Namespace: TailplaneNamespace, IngressClass: TailplaneClass, LoadBalancerClass: TailplaneClass},
	}
}

// ForSide is a copy of a seed manifest's object that side serves: the same
// object with the side's IngressClass or loadBalancerClass (the one edit);
// objects of neither kind are unchanged.
func ForSide(o *unstructured.Unstructured, side Side) *unstructured.Unstructured {
	c := o.DeepCopy()
	switch c.GetKind() {
	case "Ingress":
		if _, ok, _ := unstructured.NestedString(c.Object, "spec", "ingressClassName"); ok {
			_ = unstructured.SetNestedField(c.Object, side.IngressClass, "spec", "ingressClassName")
		}
	case "Service":
		if _, ok, _ := unstructured.NestedString(c.Object, "spec", "loadBalancerClass"); ok {
			_ = unstructured.SetNestedField(c.Object, side.LoadBalancerClass, "spec", "loadBalancerClass")
		}
	}
	return c
}

// FirstSuccess applies parent and measures the time until probe first
// succeeds: the time from `kubectl apply` to the first working connection
// through the tailnet.
func (c *Cluster) FirstSuccess(ctx context.Context, parent *unstructured.Unstructured, probe func(context.Context) error, timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	if _, err := c.Apply(ctx, parent); err != nil {
		return 0, err
	}
	var last error
	err := Poll(ctx, timeout, 250*time.Millisecond, func() (bool, error) {
		last = probe(ctx)
		return last == nil, last
	}, fmt.Sprintf("the first successful request through %s %s", parent.GetKind(), parent.GetName()))
	if err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// HTTPProbe is a probe that wants status want from url.
func HTTPProbe(client *http.Client, url string, want int) func(context.Context) error {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			return fmt.Errorf("GET %s: %s, want %d", url, resp.Status, want)
		}
		return nil
	}
}

// DevicesGone waits until the tailnet has no device whose MagicDNS name
// starts with one of hosts' labels (host.) and returns how long that took
// from start; devices still there at the timeout are an error naming them.
func DevicesGone(ctx context.Context, env TailnetEnv, hosts []string, start time.Time, timeout time.Duration) (time.Duration, error) {
	d, stayed, err := DevicesLeaving(ctx, env, hosts, start, timeout)
	if err == nil && len(stayed) > 0 {
		err = fmt.Errorf("%d of %d devices still on the tailnet after %s: %s", len(stayed), len(hosts), timeout, strings.Join(stayed[:min(len(stayed), 5)], ", "))
	}
	return d, err
}

// DevicesLeaving waits up to timeout for the devices of hosts to leave the
// tailnet, and returns how long after start the last one that left did,
// and the hosts whose devices are still there at the timeout (an operator
// that did not delete them: they stay for good). Only the tailnet API
// failing for the whole wait is an error.
func DevicesLeaving(ctx context.Context, env TailnetEnv, hosts []string, start time.Time, timeout time.Duration) (time.Duration, []string, error) {
	var last time.Duration
	var stayed []string
	remaining := -1
	err := Poll(ctx, timeout, 500*time.Millisecond, func() (bool, error) {
		devices, err := env.Devices(ctx)
		if err != nil {
			return false, err
		}
		var now []string
		for _, h := range hosts {
			for _, d := range devices {
				if strings.HasPrefix(d.Name, h+".") || d.Hostname == h {
					now = append(now, h)
					break
				}
			}
		}
		if remaining < 0 || len(now) < remaining {
			last = time.Since(start)
		}
		remaining, stayed = len(now), now
		return len(now) == 0, nil
	}, fmt.Sprintf("the devices of %d hosts to leave the tailnet", len(hosts)))
	if err != nil && remaining >= 0 {
		return last, stayed, nil
	}
	return last, stayed, err
}

// DevicesPresent waits until the tailnet has a device for each of hosts.
func DevicesPresent(ctx context.Context, env TailnetEnv, hosts []string, timeout time.Duration) error {
	return Poll(ctx, timeout, time.Second, func() (bool, error) {
		devices, err := env.Devices(ctx)
		if err != nil {
			return false, err
		}
		have := map[string]bool{}
		for _, d := range devices {
			have[strings.SplitN(d.Name, ".", 2)[0]] = true
		}
		missing := 0
		for _, h := range hosts {
			if !have[h] {
				missing++
			}
		}
		if missing > 0 {
			return false, fmt.Errorf("%d of %d devices missing", missing, len(hosts))
		}
		return true, nil
	}, fmt.Sprintf("%d devices", len(hosts)))
}

// LoadResult is what Load measured.
type LoadResult struct {
	Requests, Failures int
	PerSecond          float64
	P50, P99           time.Duration
	// Conns is how many connections the client opened during the load:
	// about one per worker when the proxy keeps connections alive.
	Conns int64
}

// Load sends GET url from workers goroutines, each on keep-alive
// connections, for d, and reports successful requests per second and the
// latency percentiles of the successful ones. dials counts the client's
// connections.
func Load(ctx context.Context, client *http.Client, dials *atomic.Int64, url string, workers int, d time.Duration) LoadResult {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	// Connections kept from an earlier load went to another proxy of the
	// same name (each side's device is named alike): start afresh, so that
	// the count is this proxy's.
	client.CloseIdleConnections()
	dials0 := dials.Load()
	var mu sync.Mutex
	var lat []float64
	failures := 0
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				t0 := time.Now()
				err := HTTPProbe(client, url, http.StatusOK)(ctx)
				took := time.Since(t0)
				mu.Lock()
				if err == nil {
					lat = append(lat, took.Seconds())
				} else if ctx.Err() == nil {
					failures++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	return LoadResult{
		Requests: len(lat), Failures: failures, PerSecond: float64(len(lat)) / elapsed,
		P50:   time.Duration(Percentile(lat, 50) * float64(time.Second)),
		P99:   time.Duration(Percentile(lat, 99) * float64(time.Second)),
		Conns: dials.Load() - dials0,
	}
}
