package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/log"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tailplane/tailplane/internal/kubestate"
	"github.com/tailplane/tailplane/internal/testenv"
	"github.com/tailplane/tailplane/proxy/config"
)

var env = testenv.New()

func TestMain(m *testing.M) { os.Exit(env.Run(m)) }

// The operator hands the proxy a RoutingPlugin spec whose module is a copy in
// the proxy's namespace; the proxy resolves it there and reports the outcome
// under the RoutingPlugin's name in its state Secret.
func TestPluginLoaderReportsInStateSecret(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	kube := env.Clientset(t)
	ns := env.Namespace(t)
	state, err := kubestate.New(ctx, kube, ns, "proxy-0")
	if err != nil {
		t.Fatal(err)
	}
	loader, err := newPluginLoader(kube, ns, t.TempDir(), state, log.New(io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	spec := `{"module":{"secretKeyRef":{"name":"plugin-canary","key":"module.wasm.gz"},"sha256":"` + strings.Repeat("ab", 32) + `"},
	  "order":1,"failurePolicy":"Open","timeout":"100ms","capabilities":["route"]}`
	ps := []config.Plugin{{Name: "apps/canary", Spec: json.RawMessage(spec)}}

	got, err := loader.spec(ps[0])
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "apps/canary" || got.Source == nil || got.Source.Namespace != ns || got.Source.Name != "plugin-canary" || got.Source.Key != "module.wasm.gz" {
		t.Fatalf("spec = %+v (source %+v); want the module resolved in the proxy's namespace %s under the operator's name", got, got.Source, ns)
	}

	// The module copy does not exist: the config is still served (the plugin's
	// failure policy decides per request) and the reason is reported.
	if _, err := loader.routers(ctx, ps); err != nil {
		t.Fatalf("a plugin that fails to load refused the whole config: %v", err)
	}
	sec, err := kube.CoreV1().Secrets(ns).Get(ctx, "proxy-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var reports []pluginReport
	if err := json.Unmarshal(sec.Data[keyPluginStatus], &reports); err != nil {
		t.Fatalf("plugin_status = %q: %v", sec.Data[keyPluginStatus], err)
	}
	if len(reports) != 1 || reports[0].Name != "apps/canary" || reports[0].Loaded || reports[0].Error == "" {
		t.Fatalf("plugin_status = %+v; want one failed report for apps/canary with its reason", reports)
	}

	// A spec that is not a RoutingPlugin spec refuses the config with the
	// plugin's index and name.
	bad := []config.Plugin{{Name: "apps/broken", Spec: json.RawMessage(`{"module":{}}`)}}
	if _, err := loader.routers(ctx, bad); err == nil || !strings.Contains(err.Error(), "plugins[0]") {
		t.Fatalf("bad spec: err = %v, want a refusal naming plugins[0]", err)
	}
}
