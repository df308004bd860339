package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/charmbracelet/log"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"

	"github.com/tailplane/tailplane/internal/proxystate"
	"github.com/tailplane/tailplane/plugins"
	"github.com/tailplane/tailplane/proxy/config"
	"github.com/tailplane/tailplane/proxy/route"
)

// statusSetter writes keys of the state Secret (kubestate.Store).
type statusSetter interface {
	Set(ctx context.Context, kv map[string][]byte) error
}

// pluginLoader turns the config's plugins into the router chain the proxy
// runs after its routing table. Each config entry is a RoutingPlugin's spec
// as the operator distributed it, its module copied into the proxy's own
// namespace; the entry's name is the RoutingPlugin's "<namespace>/<name>".
type pluginLoader struct {
	manager   *plugins.Manager
	namespace string
	status    statusSetter // nil: outcomes are only logged
	log       *log.Logger

	mu     sync.Mutex // guards last and health, serialises writes
	last   []plugins.Status
	health *failureWatch
}

// reg receives the plugin host's metrics (the proxy's registry, served on
// its /metrics); nil keeps them in a registry of the manager's own.
func newPluginLoader(kube kubernetes.Interface, namespace, cacheDir string, status statusSetter, reg prometheus.Registerer, logger *log.Logger) (*pluginLoader, error) {
	l := &pluginLoader{namespace: namespace, status: status, log: logger, health: newFailureWatch(failureWindow, failureMinGap)}
	// The manager reports after every Apply and after every retry of a
	// plugin that failed to load, so plugin_status follows the retries too.
	m, err := plugins.New(plugins.Options{CacheDir: cacheDir, Kube: kube, Logger: logger, OnStatus: l.report, Registerer: reg})
	if err != nil {
		return nil, fmt.Errorf("plugin host: %w", err)
	}
	l.manager = m
	return l, nil
}

// routers is proxy.Options.PluginRouters. A spec that cannot be read
// refuses the config; a module that fails to load is handled by its
// failure policy inside the manager (and retried there), reported, never
// fatal.
func (l *pluginLoader) routers(ctx context.Context, ps []config.Plugin) ([]route.Router, error) {
	specs := make([]plugins.Spec, 0, len(ps))
	for i, p := range ps {
		spec, err := l.spec(p)
		if err != nil {
			return nil, fmt.Errorf("plugins[%d]: %w", i, err)
		}
		specs = append(specs, spec)
	}
	l.manager.Apply(ctx, specs)
	if len(specs) == 0 {
		return nil, nil
	}
	return []route.Router{l.manager}, nil
}

// report writes the plugins' outcome to the state Secret's plugin_status
// (the manager's OnStatus: after every Apply and retry).
func (l *pluginLoader) report(ctx context.Context, statuses []plugins.Status) {
	for _, s := range statuses {
		if s.Error != "" {
			l.log.Warn("plugin did not load", "plugin", s.Name, "err", s.Error)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.last = statuses
	l.health.observe(time.Now(), l.manager.Failures())
	l.write(ctx)
}

// write writes plugin_status: the last statuses with the run-time failures
// of each serving plugin. Called with l.mu held.
func (l *pluginLoader) write(ctx context.Context) {
	reports := make([]proxystate.PluginReport, 0, len(l.last))
	for _, s := range l.last {
		r := proxystate.PluginReport{Name: s.Name, Loaded: s.Loaded, SHA256: s.SHA256, Error: s.Error}
		if s.Loaded {
			r.Failures = l.health.failures(s.Name)
		}
		reports = append(reports, r)
	}
	now := time.Now()
	if l.status == nil {
		l.health.wrote(now)
		return
	}
	b, _ := json.Marshal(reports)
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := l.status.Set(wctx, map[string][]byte{proxystate.KeyPluginStatus: b}); err != nil {
		l.log.Warn("cannot report plugin status", "err", err)
		return
	}
	l.health.wrote(now)
}

func (l *pluginLoader) spec(p config.Plugin) (plugins.Spec, error) {
	var spec map[string]any
	if err := json.Unmarshal(p.Spec, &spec); err != nil {
		return plugins.Spec{}, fmt.Errorf("plugin %q: spec: %w", p.Name, err)
	}
	name := p.Name
	if _, n, ok := strings.Cut(p.Name, "/"); ok {
		name = n
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"namespace": l.namespace, "name": name},
		"spec":     spec,
	}}
	s, err := plugins.SpecFromRoutingPlugin(obj)
	if err != nil {
		return plugins.Spec{}, err
	}
	// Report under the operator's name for the RoutingPlugin.
	s.Name = p.Name
	return s, nil
}
