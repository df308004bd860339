package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/tailplane/tailplane/handlers/lib/cluster"
	"github.com/tailplane/tailplane/handlers/lib/device"
	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/runtime"
)

// UncheckedRetry is how soon a parent whose Tailnet exists but was not
// checked yet (after a restart) is handled again.
const UncheckedRetry = 2 * time.Second

// HostnameRetry is how often a parent whose hostname is taken checks again
// (sooner when the other parent lets the name go).
const HostnameRetry = 30 * time.Second

// FailedRetry is how often a parent whose plan failed (Plan.Failed) tries
// again, for causes no watch sees (another parent freeing a node port).
const FailedRetry = 30 * time.Second

// Pipeline runs the proxies of every registered module. One Pipeline is
// shared by all modules, so that hostname claims see each other.
type Pipeline struct {
	d *cluster.Deps

	mu      sync.Mutex
	modules map[string]*Module // by role
	dev     *device.Devices
	claims  *device.Claims
	// official are the parents the official operator left proxies for.
	official officialIndex
	// handBackOwner, set in a hand-back, is the operator's Deployment, which
	// Tailplane's proxies are given to (handback_keep.go).
	handBackOwner *metav1.OwnerReference
}

// New returns the pipeline of the modules that share d, and starts watching
// the proxies' state Secrets (a parent is handled again when a replica
// reports a device, a new name or a refused config), and, on a tailnet
// whose keys carry no description, sweeping its orphaned auth keys; and
// sweeping the proxies whose parent left without its delete handler.
func New(d *cluster.Deps) *Pipeline {
	p := newPipeline(d)
	p.watchState()
	p.registerOrphanSweep()
	p.registerStraySweep()
	return p
}

// newPipeline returns a pipeline that watches and sweeps nothing.
func newPipeline(d *cluster.Deps) *Pipeline {
	p := &Pipeline{d: d, modules: map[string]*Module{}}
	p.dev = &device.Devices{Kube: d.Kube, Namespace: d.Settings.Namespace, Log: d.Log, Kind: "proxy",
		KeyInConfig: func(s *corev1.Secret) string { key, _ := proxyset.AuthKeyFor(s, nil); return key }}
	p.claims = &device.Claims{Kube: d.Kube, Namespace: d.Settings.Namespace, Wake: p.enqueueParent}
	return p
}

// Register adds m's handlers: one for create, update, resume and enqueue
// runs the pipeline; delete removes every replica's device, the proxy's
// objects, then the finalizer. Objects that neither ask for m's proxy nor
// have one match no handler.
func (p *Pipeline) Register(op *runtime.Operator, m Module) {
	p.mu.Lock()
	p.modules[m.Role] = &m
	p.mu.Unlock()
	ours := []runtime.Option{runtime.When(runtime.Or(m.IsOurs, p.hasProxyPredicate(&m))), p.d.StateStore()}
	if !m.ClusterScoped {
		ours = p.d.Scope(ours...)
	}
	sync := func(ctx context.Context, ev *runtime.Event) (any, error) {
		return nil, cluster.Retry(p.syncLegacy(ctx, &m, ev), ev.Retry)
	}
	cleanup := func(ctx context.Context, ev *runtime.Event) (any, error) {
		be, err := p.cleanupBackend(ctx, &m, ev.Object)
		if err == nil {
			err = p.deleteProxy(ctx, be, m.parent(ev.Object))
		}
		if err == nil && m.LegacyNameKey != "" {
			err = p.adoptLegacy(ctx, &m, ev.Object)
		}
		return nil, cluster.Retry(err, ev.Retry)
	}
	op.On(m.Resource, m.ID+"-sync", sync, append(ours,
		runtime.Causes(runtime.CauseCreate, runtime.CauseUpdate, runtime.CauseResume, runtime.CauseEnqueue))...)
	op.OnDelete(m.Resource, m.ID+"-cleanup", cleanup, ours...)
}

// parent is the proxyset parent of obj's proxy in m.
func (m *Module) parent(obj *unstructured.Unstructured) proxyset.Parent {
	return proxyset.Parent{Type: m.ParentType, Namespace: obj.GetNamespace(), Name: obj.GetName(),
		UID: obj.GetUID(), Role: m.Role, NameKey: m.NameKey}
}

// sync brings obj's proxy and status in line with obj.
func (p *Pipeline) sync(ctx context.Context, m *Module, obj *unstructured.Unstructured) error {
	if !m.IsOurs(obj) {
		return p.release(ctx, m, obj)
	}
	be, err := p.backend(m, obj)
	if err != nil && p.unchecked(ctx, m.tailnetOf(obj), err) {
		p.d.Op.Enqueue(m.Resource, runtime.ObjectKey(obj.GetNamespace(), obj.GetName()), UncheckedRetry)
		return nil
	}
	if err != nil {
		// Retried: the Tailnet's handler has its users handled again when
		// it becomes ready.
		msg := TailnetUnavailable(err)
		return errors.Join(m.Report(ctx, obj, Outcome{Stage: Failed, Cause: CauseTailnet, Message: msg}),
			runtime.Temporary(err, TailnetRetry))
	}
	plan, err := m.Plan(ctx, obj)
	if err != nil || plan == nil {
		return err
	}
	if plan.Invalid != "" {
		return m.Report(ctx, obj, Outcome{Stage: Invalid, Cause: CauseInvalid, Message: plan.Invalid})
	}
	pc, waiting, err := p.d.ProxyClassFor(ctx, plan.ProxyClass)
	if err != nil {
		return err
	}
	if waiting != "" {
		return m.Report(ctx, obj, Outcome{Stage: Waiting, Cause: CauseProxyClass, Message: waiting})
	}
	if plan.Failed != "" {
		// Nothing is applied; the replicas that run keep serving, and the
		// outcome says so.
		proxy, err := p.dev.Read(ctx, m.parent(obj), len(plan.Hostnames), p.cachedStates(m.parent(obj)))
		if err != nil {
			return err
		}
		now := outcome(proxy, plan.Hostnames)
		p.d.Op.Enqueue(m.Resource, runtime.ObjectKey(obj.GetNamespace(), obj.GetName()), FailedRetry)
		return m.Report(ctx, obj, Outcome{Stage: Failed, Cause: CausePlan, Message: plan.Failed, Devices: now.Devices, Serving: now.Serving})
	}
	if err := p.moveTailnet(ctx, m, obj, m.tailnetOf(obj)); err != nil {
		return err
	}
	if err := p.dropReplacedProxy(ctx, m, obj); err != nil {
		return err
	}
	parent := m.parent(obj)
	if err := p.claims.Claim(ctx, parent, plan.Hostnames, p.describe); err != nil {
		// Retried: the other parent may give the name up.
		return errors.Join(m.Report(ctx, obj, Outcome{Stage: Invalid, Cause: CauseHostnameTaken, Message: err.Error()}),
			runtime.Temporary(err, HostnameRetry))
	}
	if m.LegacyNameKey != "" {
		if err := p.adoptLegacy(ctx, m, obj); err != nil {
			return err
		}
	}
	step, err := p.adoptOfficial(ctx, m, obj, parent, be)
	if err != nil {
		return err
	}
	if step.waiting != "" {
		return m.Report(ctx, obj, Outcome{Stage: Waiting, Cause: CauseAdoption, Message: step.waiting})
	}
	if step.replicas > 0 && step.replicas < len(plan.Hostnames) {
		// The official replicas above still serve (adopt.go).
		plan.Hostnames = plan.Hostnames[:step.replicas]
	}
	// The index serves the replicas while every one has a device; one
	// about to be handed a key is read from the API server, since the key
	// decision must see the latest config (device.Devices.Read).
	proxy, err := p.dev.Read(ctx, parent, len(plan.Hostnames), p.cachedStates(parent))
	if err != nil {
		return err
	}
	keys := make([]string, len(proxy.Replicas))
	for i, r := range proxy.Replicas {
		if keys[i], err = p.dev.AuthKey(ctx, be, r, plan.Tags); err != nil {
			msg := err.Error()
			if refused, ok := RefusedTags(err, plan.Tags); ok {
				// Only a policy edit fixes it, which no watch sees.
				msg, err = refused, runtime.Temporary(err, TagsRetry)
			}
			return errors.Join(err, m.Report(ctx, obj, Outcome{Stage: Failed, Cause: CauseAuthKey, Message: msg}))
		}
	}
	objs, err := Render(parent, p.d.Settings, plan, Login{Tailnet: m.tailnetOf(obj), Server: be.LoginServer(), Keys: keys})
	if err != nil {
		return runtime.Permanent(err)
	}
	if err := p.d.ApplyProxy(ctx, objs.Objects, pc, m.ProxyKind, plan.Hostnames, objs.Extra...); err != nil {
		// Shown whole: the API server's refusal (a ProxyClass value it
		// rejects, say) is what the user must fix.
		return errors.Join(err, m.Report(ctx, obj, Outcome{Stage: Failed, Cause: CauseApply, Message: "failed to provision proxy: " + err.Error()}))
	}
	if err := p.dev.ScaleDown(ctx, be, proxy); err != nil {
		return err
	}
	if plan.AfterApply != nil {
		if err := plan.AfterApply(ctx, objs.Objects); err != nil {
			return err
		}
	}
	out := outcome(proxy, plan.Hostnames)
	if out.Stage == Ready && plan.Check != nil {
		if msg, retry := plan.Check(ctx); msg != "" {
			p.d.Op.Enqueue(m.Resource, runtime.ObjectKey(obj.GetNamespace(), obj.GetName()), retry)
			out.Stage, out.Cause, out.Message = Failed, CauseCheck, msg
		}
	}
	return m.Report(ctx, obj, out)
}

// outcome is the one definition of pending, renamed and refused: a replica
// whose proxy refused its config fails the parent (and is not serving when
// its running process applied no config); one without a device (no ID or
// no name yet) or still under its old name keeps it pending.
func outcome(proxy *Proxy, hostnames []string) Outcome {
	out := Outcome{Stage: Ready}
	for i, r := range proxy.Replicas {
		out.Devices = append(out.Devices, r.Device)
		if r.Device.ID != "" && r.Device.Named(hostnames[i]) && (configError(r) == "" || configApplied(r)) {
			out.Serving = append(out.Serving, r.Device)
		}
	}
	for i, r := range proxy.Replicas {
		switch {
		case configError(r) != "":
			return Outcome{Stage: Failed, Cause: CauseConfigError, Message: configError(r), Devices: out.Devices, Serving: out.Serving}
		case r.Device.ID == "" || r.Device.FQDN == "":
			if out.Stage > Pending {
				out.Stage, out.Cause, out.Message = Pending, CauseNoDevice, "no Tailscale hostname known yet, waiting for proxy pod to finish auth"
			}
		case !r.Device.Named(hostnames[i]):
			if out.Stage > Pending {
				out.Stage, out.Cause, out.Message = Pending, CauseRenaming, RenamePending(r.Device, hostnames[i])
			}
		}
	}
	return out
}

// RenamePending is the message of a proxy whose device does not have its
// new hostname yet (the proxy renamed it; control has not).
func RenamePending(dev proxyset.Device, hostname string) string {
	want := hostname
	if _, domain, ok := strings.Cut(dev.FQDN, "."); ok {
		want += "." + domain
	}
	return fmt.Sprintf("waiting for the device to be renamed: it is still %s, not yet %s", dev.FQDN, want)
}

// release clears the status of a parent that no longer asks for m's proxy,
// then deletes the proxy and waits until the watch saw it gone: the cycle
// then ends with the parent matching no handler, and the runtime removes
// the finalizer.
func (p *Pipeline) release(ctx context.Context, m *Module, obj *unstructured.Unstructured) error {
	parent := m.parent(obj)
	proxy, err := p.ReadProxy(ctx, parent, 0)
	if err != nil {
		return err
	}
	var devices []proxyset.Device
	for _, r := range proxy.Extra {
		devices = append(devices, r.Device)
	}
	if err := m.Release(ctx, obj, devices); err != nil {
		return err
	}
	be, err := p.cleanupBackend(ctx, m, obj)
	if err != nil {
		return err
	}
	if err := p.deleteProxy(ctx, be, parent); err != nil {
		return err
	}
	if m.LegacyNameKey != "" {
		if err := p.adoptLegacy(ctx, m, obj); err != nil {
			return err
		}
	}
	return p.waitProxyGone(ctx, m, parent)
}

// describe names a parent for messages: "Service default/web".
func (p *Pipeline) describe(k proxyset.Key) string {
	p.mu.Lock()
	m := p.modules[k.Role]
	p.mu.Unlock()
	kind := "Service"
	if m != nil {
		kind = m.Kind
	}
	return kind + " " + k.Namespace + "/" + k.Name
}

// resourceOf is the resource of the parents whose proxies have role.
func (p *Pipeline) resourceOf(role string) (schema.GroupVersionResource, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if m, ok := p.modules[role]; ok {
		return m.Resource, true
	}
	return schema.GroupVersionResource{}, false
}

// enqueueParent has the runtime handle the parent k names again after
// delay (its module is the one of k's role).
func (p *Pipeline) enqueueParent(k proxyset.Key, after time.Duration) {
	if res, ok := p.resourceOf(k.Role); ok {
		p.d.Op.Enqueue(res, runtime.ObjectKey(k.Namespace, k.Name), after)
	}
}
