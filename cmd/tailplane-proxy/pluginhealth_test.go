package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tailplane/tailplane/internal/proxystate"
	"github.com/tailplane/tailplane/internal/testpoll"
	"github.com/tailplane/tailplane/proxy/config"
	"github.com/tailplane/tailplane/proxy/route"
)

// trapModule is noopModule whose handle_request traps (unreachable).
var trapModule = []byte("\x00asm\x01\x00\x00\x00" +
	"\x01\x0a\x02\x60\x00\x01\x7e\x60\x02\x7f\x7f\x00" + // types: ()->i64, (i32,i32)->()
	"\x03\x03\x02\x00\x01" + // functions
	"\x05\x03\x01\x00\x01" + // one memory page
	"\x07\x2d\x03\x06memory\x02\x00\x0ehandle_request\x00\x00\x0fhandle_response\x00\x01" +
	"\x0a\x08\x02\x03\x00\x00\x0b\x02\x00\x0b") // unreachable; nothing

// A plugin that traps at run time is reported in plugin_status with its
// counts, its recent window and its last error, as soon as it starts
// failing; once the window holds no failure, the report says so.
func TestPluginLoaderReportsRunTimeFailures(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	kube, ns, loader := newTestLoader(ctx, t)
	const window = 3 * time.Second
	loader.health = newFailureWatch(window, 200*time.Millisecond)
	go loader.watchFailures(ctx, 50*time.Millisecond)

	sum := sha256.Sum256(trapModule)
	digest := hex.EncodeToString(sum[:])
	copied := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "plugin-trap", Namespace: ns}, Data: map[string][]byte{"module.wasm": trapModule}}
	if _, err := kube.CoreV1().Secrets(ns).Create(ctx, copied, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	spec := `{"module":{"secretKeyRef":{"name":"plugin-trap","key":"module.wasm"},"sha256":"` + digest + `"},"failurePolicy":"Closed"}`
	routers, err := loader.routers(ctx, []config.Plugin{{Name: "apps/trap", Spec: json.RawMessage(spec)}})
	if err != nil || len(routers) != 1 {
		t.Fatalf("routers: %v, %v", routers, err)
	}
	reports := func() ([]proxystate.PluginReport, error) { return pluginReports(ctx, kube, ns) }
	if r, err := reports(); err != nil || len(r) != 1 || !r[0].Loaded || r[0].Failures != nil {
		t.Fatalf("plugin_status = %+v, %v; want the plugin loaded, nothing failed yet", r, err)
	}

	const n = 5
	for range n {
		req := &route.Request{Method: "GET", Host: "h", URI: "/", Path: "/", Header: http.Header{},
			Route: &route.Route{Path: "/", Backends: []route.Backend{{Name: "apps/web:80", Address: "10.0.0.1:80"}}}}
		d, err := routers[0].Route(ctx, req, route.Decision{Action: route.Forward, Backend: &req.Route.Backends[0]})
		if err != nil || d.Action != route.Deny || d.Status != http.StatusServiceUnavailable {
			t.Fatalf("a trapping fail-closed plugin: %+v, %v; want 503", d, err)
		}
	}
	testpoll.Until(t, 10*time.Second, "the failures reported", func() error {
		r, err := reports()
		if err != nil {
			return err
		}
		if len(r) != 1 || r[0].Failures == nil {
			return fmt.Errorf("plugin_status = %+v", r)
		}
		f := r[0].Failures
		if f.Requests != n || f.Failed != n || f.ByClass["trap"] != n || f.RecentFailed != n || f.RecentRequests != n ||
			f.WindowSeconds != int(window/time.Second) || f.LastFailure.IsZero() || f.Since.IsZero() {
			return fmt.Errorf("failures %+v, want %d of %d failed, all recent, by trap", f, n, n)
		}
		if !strings.Contains(f.LastError, "apps/trap: handle_request: wasm error: unreachable") || strings.Contains(f.LastError, "\n") {
			return fmt.Errorf("last error %q, want the trap on one line", f.LastError)
		}
		return nil
	})
	testpoll.Until(t, 3*window, "the window cleared", func() error {
		r, err := reports()
		if err != nil {
			return err
		}
		if len(r) != 1 || r[0].Failures == nil {
			return fmt.Errorf("plugin_status = %+v", r)
		}
		if f := r[0].Failures; f.RecentFailed != 0 || f.Failed != n {
			return fmt.Errorf("failures %+v, want %d failed, none recent", f, n)
		}
		return nil
	})
}
