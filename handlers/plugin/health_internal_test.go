package plugin

import (
	"encoding/base64"
	"encoding/json"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/tailplane/tailplane/internal/proxystate"
)

func stateSecret(reports ...proxystate.PluginReport) *unstructured.Unstructured {
	b, _ := json.Marshal(reports)
	return &unstructured.Unstructured{Object: map[string]any{"data": map[string]any{
		proxystate.KeyPluginStatus: base64.StdEncoding.EncodeToString(b), proxystate.KeyDeviceID: "n1"}}}
}

// A state Secret's change re-reads exactly the RoutingPlugins whose report
// changed, appeared or went away; other keys' changes re-read none.
func TestReportsChangedMapsToThePluginsReported(t *testing.T) {
	a := proxystate.PluginReport{Name: "apps/a", Loaded: true, SHA256: "1"}
	b := proxystate.PluginReport{Name: "apps/b", Loaded: true, SHA256: "2"}
	failing := b
	failing.Failures = &proxystate.PluginFailures{Failed: 3, RecentFailed: 3}
	names := func(typ watch.EventType, old, obj *unstructured.Unstructured) []string {
		var out []string
		for _, k := range reportsChanged(typ, old, obj) {
			out = append(out, k.Namespace+"/"+k.Name)
		}
		slices.Sort(out)
		return out
	}
	for _, c := range []struct {
		what     string
		typ      watch.EventType
		old, obj *unstructured.Unstructured
		want     []string
	}{
		{"created", watch.Added, nil, stateSecret(a, b), []string{"apps/a", "apps/b"}},
		{"unchanged", watch.Modified, stateSecret(a, b), stateSecret(a, b), nil},
		{"one starts failing", watch.Modified, stateSecret(a, b), stateSecret(a, failing), []string{"apps/b"}},
		{"one removed", watch.Modified, stateSecret(a, b), stateSecret(b), []string{"apps/a"}},
		{"deleted", watch.Deleted, nil, stateSecret(a), []string{"apps/a"}},
		{"no report", watch.Modified, &unstructured.Unstructured{Object: map[string]any{}}, &unstructured.Unstructured{Object: map[string]any{}}, nil},
	} {
		if got := names(c.typ, c.old, c.obj); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.what, got, c.want)
		}
	}
}
