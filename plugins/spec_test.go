package plugins_test

import (
	"os"
	"reflect"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/tailplane/tailplane/plugins"
	"github.com/tailplane/tailplane/plugins/host"
	"github.com/tailplane/tailplane/plugins/sdk/abi"
	"github.com/tailplane/tailplane/plugins/source"
)

// The documented RoutingPlugin example maps onto the Spec a proxy applies.
func TestSpecFromRoutingPlugin(t *testing.T) {
	b, err := os.ReadFile("examples/routingplugin.yaml")
	if err != nil {
		t.Fatal(err)
	}
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(b, &obj.Object); err != nil {
		t.Fatal(err)
	}
	obj.SetNamespace("apps")
	s, err := plugins.SpecFromRoutingPlugin(obj)
	if err != nil {
		t.Fatal(err)
	}
	want := source.Ref{Kind: source.ConfigMap, Namespace: "apps", Name: "canary-plugin", Key: "canary.wasm.gz",
		SHA256: "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0"}
	if s.Source == nil || !reflect.DeepEqual(*s.Source, want) {
		t.Errorf("source = %+v, want %+v", s.Source, want)
	}
	if s.Name != "apps/canary" || s.Order != 10 || s.FailurePolicy != host.FailOpen || s.Timeout != 50*time.Millisecond ||
		s.MemoryLimit != 32<<20 || len(s.Capabilities) != 1 || s.Capabilities[0] != abi.CapRoute || s.SHA256 != want.SHA256 {
		t.Errorf("spec = %+v", s.Config)
	}
	if string(s.PluginConfig) != `{"backend":"web-canary:80","cookie":"canary","cookieValue":"1","header":"X-Canary","headerValue":"always"}` {
		t.Errorf("config = %s", s.PluginConfig)
	}
	delete(obj.Object["spec"].(map[string]any)["module"].(map[string]any), "configMapKeyRef")
	if _, err := plugins.SpecFromRoutingPlugin(obj); err == nil {
		t.Error("a module without a source was accepted")
	}
}
