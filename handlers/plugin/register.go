package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tailplane/tailplane/handlers/lib/cluster"
	"github.com/tailplane/tailplane/handlers/lib/conditions"
	"github.com/tailplane/tailplane/handlers/lib/pipeline"
	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/handlers/lib/resources"
	"github.com/tailplane/tailplane/internal/proxystate"
	"github.com/tailplane/tailplane/plugins/host"
	"github.com/tailplane/tailplane/proxy/config"
	"github.com/tailplane/tailplane/runtime"
)

// AnnotationProxyGroup names the ProxyGroup serving an Ingress, whose
// replicas run the Ingress's plugins.
const AnnotationProxyGroup = "tailscale.com/proxy-group"

// LabelPlugin marked the per-plugin module copies of earlier versions
// ("<namespace>.<name>" of the plugin); collect deletes them.
const LabelPlugin = "tailplane.dev/routingplugin"

// statusInterval is how often Ready, Degraded and loadedBy are refreshed
// from what the targeted proxies report, besides when a proxy writes its
// report (reportsChanged): it catches changes of the targets.
const statusInterval = 15 * time.Second

type module struct {
	d *cluster.Deps
	p *pipeline.Pipeline

	mu     sync.Mutex
	engine *host.Engine // created on first use: compile-only

	copyMu sync.Mutex // see handle and collect

	eventMu       sync.Mutex
	failingPosted map[types.UID]time.Time // the last RequestsFailing Event by plugin
}

// Register adds the RoutingPlugin handlers: a new or changed plugin is
// fetched, compiled (Accepted), copied into the operator namespace (once
// per digest) and put into its targeted Ingresses' proxy configs; a timer
// keeps Ready and loadedBy current; delete removes the plugin from the
// proxies and collects copies no plugin uses. Ready, Degraded and loadedBy
// follow the proxies' reports: re-read when a proxy writes its state
// Secret's plugin_status, and by a timer.
func Register(op *runtime.Operator, d *cluster.Deps, p *pipeline.Pipeline) {
	m := &module{d: d, p: p, failingPosted: map[types.UID]time.Time{}}
	op.OnCreate(resources.RoutingPlugins, "routingplugin-create", m.handle, d.Scope()...)
	op.OnUpdate(resources.RoutingPlugins, "routingplugin-update", m.handle, d.Scope()...)
	op.OnResume(resources.RoutingPlugins, "routingplugin-resume", m.handle, d.Scope()...)
	op.OnDelete(resources.RoutingPlugins, "routingplugin-cleanup", m.cleanup, d.Scope()...)
	refresh := func(ctx context.Context, ev *runtime.Event) (any, error) {
		rp, err := Decode(ev.Object)
		if err != nil || !(rp.Accepted() || rp.Serving()) {
			return nil, err
		}
		rp.APIVersion, rp.Kind = "tailplane.dev/v1alpha1", "RoutingPlugin"
		return nil, m.refreshReady(ctx, rp)
	}
	op.Timer(resources.RoutingPlugins, "routingplugin-status", statusInterval, refresh, d.Scope()...)
	op.On(resources.RoutingPlugins, "routingplugin-reports", refresh, append(d.Scope(), runtime.Causes(runtime.CauseEnqueue))...)
	op.Watch(resources.Secrets, "routingplugin-reports", reportsChanged, p.StateScope()...)
	op.OnCleanup(func(ctx context.Context) error {
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.engine != nil {
			// A later term of leadership compiles into a new engine.
			e := m.engine
			m.engine = nil
			return e.Close(ctx)
		}
		return nil
	})
}

func (m *module) compile(ctx context.Context, cfg host.Config) error {
	m.mu.Lock()
	if m.engine == nil {
		e, err := host.NewEngine(host.EngineOptions{Logger: m.d.Log})
		if err != nil {
			m.mu.Unlock()
			return fmt.Errorf("plugin host: %w", err)
		}
		m.engine = e
	}
	e := m.engine
	m.mu.Unlock()
	cfg.Prewarm = 1
	p, err := e.Load(ctx, cfg)
	if err != nil {
		return err
	}
	return p.Close(ctx)
}

func (m *module) handle(ctx context.Context, ev *runtime.Event) (any, error) {
	rp, err := Decode(ev.Object)
	if err != nil {
		return nil, runtime.Permanent(err)
	}
	rp.APIVersion, rp.Kind = "tailplane.dev/v1alpha1", "RoutingPlugin"
	got, reason, err := m.accept(ctx, rp)
	if err != nil && reason == "" {
		return nil, err // cluster error: retried
	}
	if err != nil {
		return m.refuse(ctx, rp, reason, err, ev.Retry)
	}
	// The copy is stored and named in the status under copyMu: collect
	// never sees a copy that no status names yet.
	m.copyMu.Lock()
	chunks, err := m.store(ctx, got.sum, got.module)
	if err != nil {
		m.copyMu.Unlock()
		return nil, err
	}
	accepted := metav1.Condition{Type: ConditionAccepted, Status: metav1.ConditionTrue, Reason: ReasonCompiled,
		Message: fmt.Sprintf("module compiled (%d bytes, sha256 %s) from %s", len(got.module), got.sum, got.origin), ObservedGeneration: rp.Generation}
	status := map[string]any{"observedGeneration": rp.Generation, "sha256": got.sum, "size": len(got.module),
		"chunks": chunks, "source": rp.SourceString()}
	changed := rp.Status.SHA256 != got.sum
	// Ready is recomputed for the new module in the same patch: the
	// proxies still report the previous one, so Ready must not stay True
	// (with the new sha256 and size beside it) until the timer.
	rp.Status.SHA256 = got.sum
	rp.Status.Conditions = conditions.Set(rp.Status.Conditions, accepted)
	was := condition(rp, ConditionDegraded)
	ready, degradedNow, loaded, err := m.ready(ctx, rp)
	if err != nil {
		m.copyMu.Unlock()
		return nil, err
	}
	status["conditions"] = conditions.Set(conditions.Set(rp.Status.Conditions, ready), degradedNow)
	status["loadedBy"] = loaded
	// Written now: the Ingresses handled next must see the plugin accepted.
	err = m.d.PatchStatus(ctx, resources.RoutingPlugins, rp.Namespace, rp.Name, status)
	m.copyMu.Unlock()
	if err != nil {
		return nil, err
	}
	if changed {
		m.d.Post(rp, corev1.EventTypeNormal, ReasonCompiled, accepted.Message)
	}
	m.postFailing(rp, was, degradedNow)
	m.resyncIngresses(ctx, rp.Namespace)
	m.collect(ctx)
	return nil, nil
}

// refuse records why the newest spec's module was not accepted: Accepted
// False with the reason and a Warning Event. The status keeps the previous
// module (sha256, chunks), which the proxies keep running: Ready is then
// what they report of it (True once they run it, as a Deployment stays
// Available while a rollout is stuck), its message saying the newest spec
// is refused; without a previous module Ready is False, NotAccepted.
// Most refusals wait for
// the next change of the plugin; an unreachable source is retried with the
// runtime's backoff, and a source not found (a ConfigMap or Secret applied
// after its plugin, a tag not pushed yet) is looked for again after
// notFoundRetry(retry): the operator may only get those objects by name,
// not watch them.
func (m *module) refuse(ctx context.Context, rp *RoutingPlugin, reason string, cause error, retry int) (any, error) {
	msg := cause.Error()
	accepted := metav1.Condition{Type: ConditionAccepted, Status: metav1.ConditionFalse, Reason: reason, Message: msg, ObservedGeneration: rp.Generation}
	m.d.Post(rp, corev1.EventTypeWarning, reason, msg)
	rp.Status.Conditions = conditions.Set(rp.Status.Conditions, accepted)
	status := map[string]any{"observedGeneration": rp.Generation}
	if rp.Serving() {
		was := condition(rp, ConditionDegraded)
		ready, degradedNow, loaded, err := m.ready(ctx, rp)
		if err != nil {
			return nil, err
		}
		status["conditions"] = conditions.Set(conditions.Set(rp.Status.Conditions, ready), degradedNow)
		status["loadedBy"] = loaded
		defer m.postFailing(rp, was, degradedNow)
	} else {
		ready := metav1.Condition{Type: ConditionReady, Status: metav1.ConditionFalse, Reason: ReasonNotAccepted,
			Message: "the module is not accepted: " + reason, ObservedGeneration: rp.Generation}
		status["conditions"] = conditions.Set(rp.Status.Conditions, ready)
	}
	if err := m.d.PatchStatus(ctx, resources.RoutingPlugins, rp.Namespace, rp.Name, status); err != nil {
		return nil, err
	}
	m.resyncIngresses(ctx, rp.Namespace)
	switch reason {
	case ReasonSourceUnreachable:
		return nil, fmt.Errorf("fetch module of %s/%s: %w", rp.Namespace, rp.Name, cause)
	case ReasonSourceNotFound:
		return nil, runtime.Temporary(fmt.Errorf("module source of %s/%s: %w", rp.Namespace, rp.Name, cause), notFoundRetry(retry))
	}
	return nil, nil
}

// notFoundRetry is the wait before looking again for a module source that
// was not found: 5 s, doubling up to a minute.
func notFoundRetry(retry int) time.Duration {
	d := 5 * time.Second
	for i := 0; i < retry && d < time.Minute; i++ {
		d *= 2
	}
	return min(d, time.Minute)
}

// accept fetches, checks and compiles the module. A refusal returns its
// reason and error; an error with no reason is the cluster's (retried).
func (m *module) accept(ctx context.Context, rp *RoutingPlugin) (fetched, string, error) {
	cfg, err := HostConfig(rp, nil)
	if err != nil {
		return fetched{}, ReasonInvalidSpec, err
	}
	got, reason, err := m.fetch(ctx, rp)
	if err != nil {
		if reason == "" {
			err = fmt.Errorf("fetch module of %s/%s: %w", rp.Namespace, rp.Name, err)
		}
		return fetched{}, reason, err
	}
	cfg.Module, cfg.SHA256 = got.module, got.sum
	if err := m.compile(ctx, cfg); err != nil {
		if host.IsDeadline(err) {
			// Not the module's fault: retried with backoff.
			return fetched{}, "", fmt.Errorf("compile module of %s/%s ran out of time (retried): %w", rp.Namespace, rp.Name, err)
		}
		return fetched{}, ReasonCompileFailed, err
	}
	return got, "", nil
}

func (m *module) cleanup(ctx context.Context, ev *runtime.Event) (any, error) {
	m.eventMu.Lock()
	delete(m.failingPosted, ev.Object.GetUID())
	m.eventMu.Unlock()
	m.resyncIngresses(ctx, ev.Object.GetNamespace())
	m.collect(ctx)
	return nil, nil
}

// Targeting returns the accepted RoutingPlugins of namespace that target the
// object (kind "Ingress"), for its proxy's config, and the module copies its
// proxy must be allowed to read.
func Targeting(ctx context.Context, d *cluster.Deps, kind, namespace, name string, objLabels map[string]string) ([]config.Plugin, []string, error) {
	list, err := d.Dyn.Resource(resources.RoutingPlugins).Namespace(namespace).List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil, nil // the CRD is not installed
	}
	if err != nil {
		return nil, nil, fmt.Errorf("list RoutingPlugins in %s: %w", namespace, err)
	}
	var rps []*RoutingPlugin
	for i := range list.Items {
		if rp, err := Decode(&list.Items[i]); err == nil {
			rps = append(rps, rp)
		}
	}
	p, secrets := ForProxy(rps, kind, namespace, name, objLabels)
	return p, secrets, nil
}

// resyncIngresses re-handles the Ingresses of a namespace (each one picks
// the plugins that target it), and the ProxyGroups serving some of them.
func (m *module) resyncIngresses(ctx context.Context, namespace string) {
	list, err := m.d.Kube.NetworkingV1().Ingresses(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		m.d.Log.Warn("list Ingresses for a RoutingPlugin", "namespace", namespace, "err", err)
		return
	}
	for _, ing := range list.Items {
		m.d.Op.Enqueue(resources.Ingresses, runtime.ObjectKey(ing.Namespace, ing.Name), 0)
		if group := ing.Annotations[AnnotationProxyGroup]; group != "" {
			m.d.Op.Enqueue(resources.ProxyGroups, group, 0)
		}
	}
}

// refreshReady sets Ready, Degraded and loadedBy from the targeted proxies.
func (m *module) refreshReady(ctx context.Context, rp *RoutingPlugin) error {
	ready, degradedNow, loaded, err := m.ready(ctx, rp)
	if err != nil {
		return err
	}
	conds := conditions.Set(conditions.Set(rp.Status.Conditions, ready), degradedNow)
	if reflect.DeepEqual(conds, rp.Status.Conditions) && reflect.DeepEqual(loaded, rp.Status.LoadedBy) {
		return nil
	}
	if err := m.d.PatchStatus(ctx, resources.RoutingPlugins, rp.Namespace, rp.Name, map[string]any{"conditions": conds, "loadedBy": loaded}); err != nil {
		return err
	}
	m.postFailing(rp, condition(rp, ConditionDegraded), degradedNow)
	return nil
}

// ready computes Ready, Degraded and loadedBy for rp's module
// (rp.Status.SHA256) from the targeted proxies: Loaded only once every one
// of them reports that very sha256 loaded; Degraded while some report
// failed requests. When the newest spec was refused, Ready describes the
// previous module, which keeps serving, and says so.
func (m *module) ready(ctx context.Context, rp *RoutingPlugin) (metav1.Condition, metav1.Condition, []LoadedBy, error) {
	ready, loaded, err := m.loaded(ctx, rp)
	if err != nil {
		return metav1.Condition{}, metav1.Condition{}, nil, err
	}
	if !rp.Accepted() {
		if a := condition(rp, ConditionAccepted); a.Status == metav1.ConditionFalse {
			ready.Message += fmt.Sprintf("; the newest spec is not accepted (%s): the previous module (sha256 %s) keeps serving", a.Reason, rp.Status.SHA256)
		}
	}
	return ready, degraded(rp, loaded), loaded, nil
}

// loaded computes Ready and loadedBy from the targeted proxies' reports.
func (m *module) loaded(ctx context.Context, rp *RoutingPlugin) (metav1.Condition, []LoadedBy, error) {
	list, err := m.d.Kube.NetworkingV1().Ingresses(rp.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return metav1.Condition{}, nil, fmt.Errorf("list Ingresses: %w", err)
	}
	name := rp.Namespace + "/" + rp.Name
	var loaded []LoadedBy
	targets, ok, distributed := 0, 0, 0
	for _, ing := range list.Items {
		if !Targets(rp, "Ingress", ing.Namespace, ing.Name, ing.Labels) {
			continue
		}
		parent := proxyset.Parent{Type: proxyset.ParentIngress, Namespace: ing.Namespace, Name: ing.Name, Role: cluster.RoleIngressL7}
		proxy, err := m.p.ReadProxy(ctx, parent, 1)
		if err != nil {
			return metav1.Condition{}, nil, err
		}
		for _, r := range proxy.All() {
			targets++
			if r.Config != nil && bytes.Contains(r.Config.Data["proxy-config.json"], []byte(rp.Status.SHA256)) {
				distributed++
			}
			if r.State == nil {
				continue
			}
			var reports []proxystate.PluginReport
			if json.Unmarshal(r.State.Data[proxystate.KeyPluginStatus], &reports) != nil {
				continue
			}
			for _, rep := range reports {
				if rep.Name != name {
					continue
				}
				loaded = append(loaded, LoadedBy{Proxy: r.Names.StateSecret, SHA256: rep.SHA256, Error: rep.Error, Failures: failuresOf(rep.Failures)})
				if rep.Loaded && rep.SHA256 == rp.Status.SHA256 && rep.Error == "" {
					ok++
				}
			}
		}
	}
	ready := metav1.Condition{Type: ConditionReady, Status: metav1.ConditionFalse, ObservedGeneration: rp.Generation}
	switch {
	case targets == 0:
		ready.Reason, ready.Message = ReasonNoTargets, "no Ingress in the namespace matches the plugin's targets"
	case ok == targets:
		ready.Status, ready.Reason, ready.Message = metav1.ConditionTrue, ReasonLoaded, fmt.Sprintf("%d/%d proxies run the module", ok, targets)
	case len(loaded) > ok && hasError(loaded):
		ready.Reason, ready.Message = ReasonLoadFailed, fmt.Sprintf("%d/%d proxies run the module; see loadedBy for errors", ok, targets)
	default:
		ready.Reason, ready.Message = ReasonWaiting, fmt.Sprintf("%d/%d proxies run the module (%d configured)", ok, targets, distributed)
	}
	return ready, loaded, nil
}

func hasError(l []LoadedBy) bool {
	for _, e := range l {
		if e.Error != "" {
			return true
		}
	}
	return false
}
