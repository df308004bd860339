package plugin

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/tailplane/tailplane/handlers/lib/resources"
	"github.com/tailplane/tailplane/internal/proxystate"
	"github.com/tailplane/tailplane/runtime"
)

// failingEventGap is the least time between two RequestsFailing Events of
// one plugin: a plugin whose failures come and go would otherwise post one
// each time its proxies' windows fill and clear.
const failingEventGap = 10 * time.Minute

// reportsChanged maps a change of a proxy's state Secret to the
// RoutingPlugins whose plugin_status entry changed, before or after: their
// Ready, Degraded and loadedBy follow the proxies' reports as they are
// written, not at the next timer.
func reportsChanged(typ watch.EventType, old, obj *unstructured.Unstructured) []runtime.Key {
	before, after := stateReports(old), stateReports(obj)
	if typ == watch.Deleted {
		before, after = after, nil
	}
	seen := map[string]bool{}
	var keys []runtime.Key
	add := func(name string) {
		if seen[name] {
			return
		}
		seen[name] = true
		if ns, n, ok := strings.Cut(name, "/"); ok && ns != "" && n != "" {
			keys = append(keys, runtime.Key{Resource: resources.RoutingPlugins, Namespace: ns, Name: n})
		}
	}
	for name, r := range after {
		if b, ok := before[name]; !ok || b != r {
			add(name)
		}
	}
	for name := range before {
		if _, ok := after[name]; !ok {
			add(name)
		}
	}
	return keys
}

// stateReports are a state Secret's plugin_status entries by plugin name,
// each as its JSON (to compare).
func stateReports(obj *unstructured.Unstructured) map[string]string {
	if obj == nil {
		return nil
	}
	raw, _, _ := unstructured.NestedString(obj.Object, "data", proxystate.KeyPluginStatus)
	b, err := base64.StdEncoding.DecodeString(raw)
	if err != nil || len(b) == 0 {
		return nil
	}
	var reports []proxystate.PluginReport
	if json.Unmarshal(b, &reports) != nil {
		return nil
	}
	out := make(map[string]string, len(reports))
	for _, r := range reports {
		j, _ := json.Marshal(r)
		out[r.Name] = string(j)
	}
	return out
}

// failuresOf is a proxy's report of run-time failures as the status shows it.
func failuresOf(f *proxystate.PluginFailures) *Failures {
	if f == nil {
		return nil
	}
	out := &Failures{Requests: int64(f.Requests), Failed: int64(f.Failed), WindowSeconds: int64(f.WindowSeconds),
		RecentRequests: int64(f.RecentRequests), RecentFailed: int64(f.RecentFailed), LastError: f.LastError}
	if !f.Since.IsZero() {
		t := metav1.NewTime(f.Since.Truncate(time.Second))
		out.Since = &t
	}
	if !f.LastFailure.IsZero() {
		t := metav1.NewTime(f.LastFailure.Truncate(time.Second))
		out.LastFailure = &t
	}
	if len(f.ByClass) > 0 {
		out.ByClass = make(map[string]int64, len(f.ByClass))
		for k, v := range f.ByClass {
			out.ByClass[k] = int64(v)
		}
	}
	return out
}

// degraded is the Degraded condition from the proxies' reports: True while
// some proxy reports failed requests in its recent window, with the
// failure rate over the proxies that do and the most recent error.
func degraded(rp *RoutingPlugin, loaded []LoadedBy) metav1.Condition {
	c := metav1.Condition{Type: ConditionDegraded, Status: metav1.ConditionFalse, Reason: ReasonNoRecentFailures,
		Message: "no proxy reports a failed request", ObservedGeneration: rp.Generation}
	var requests, failed, window int64
	failing := 0
	var last *LoadedBy
	for i := range loaded {
		f := loaded[i].Failures
		if f == nil || f.RecentFailed == 0 {
			continue
		}
		failing++
		requests += max(f.RecentRequests, f.RecentFailed)
		failed += f.RecentFailed
		window = max(window, f.WindowSeconds)
		if last == nil || (f.LastFailure != nil && (last.Failures.LastFailure == nil || f.LastFailure.After(last.Failures.LastFailure.Time))) {
			last = &loaded[i]
		}
	}
	if failing == 0 {
		return c
	}
	c.Status, c.Reason = metav1.ConditionTrue, ReasonRequestsFailing
	c.Message = fmt.Sprintf("%d of %d requests failed (%d%%) in the last %ds on %d/%d proxies; last error on %s: %s",
		failed, requests, failed*100/requests, window, failing, len(loaded), last.Proxy, last.Failures.LastError)
	return c
}

// postFailing posts a Warning Event when Degraded turns True, at most once
// per failingEventGap per plugin.
func (m *module) postFailing(rp *RoutingPlugin, was, now metav1.Condition) {
	if now.Status != metav1.ConditionTrue || was.Status == metav1.ConditionTrue {
		return
	}
	m.eventMu.Lock()
	last, ok := m.failingPosted[rp.UID]
	if ok && time.Since(last) < failingEventGap {
		m.eventMu.Unlock()
		return
	}
	m.failingPosted[rp.UID] = time.Now()
	m.eventMu.Unlock()
	m.d.Post(rp, corev1.EventTypeWarning, ReasonRequestsFailing, now.Message)
}

// condition returns rp's condition of type t (zero if absent).
func condition(rp *RoutingPlugin, t string) metav1.Condition {
	for _, c := range rp.Status.Conditions {
		if c.Type == t {
			return c
		}
	}
	return metav1.Condition{}
}
