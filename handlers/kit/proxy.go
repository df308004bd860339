package kit

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/tailplane/tailplane/crds/tailscale/v1alpha1"
	"github.com/tailplane/tailplane/handlers/proxyclass"
	"github.com/tailplane/tailplane/handlers/proxyset"
	"github.com/tailplane/tailplane/internal/proxystate"
	"github.com/tailplane/tailplane/internal/tailnet"
	"github.com/tailplane/tailplane/runtime"
)

// ProxyState is what exists of a proxy in the cluster: its config and state
// Secrets (nil when absent) and the device its proxy reported.
type ProxyState struct {
	Names  proxyset.Names
	Config *corev1.Secret
	State  *corev1.Secret
	Device proxyset.Device
}

// Exists reports whether the proxy has any object yet.
func (p *ProxyState) Exists() bool { return p.Config != nil || p.State != nil }

// ReadProxy reads a parent's proxy Secrets from the API server (not a cache:
// the auth-key decision must see the latest config).
func (d *Deps) ReadProxy(ctx context.Context, parentType, namespace, name string) (*ProxyState, error) {
	names := proxyset.NamesFor(parentType, namespace, name)
	ps := &ProxyState{Names: names}
	var err error
	if ps.Config, err = d.getSecret(ctx, names.ConfigSecret); err != nil {
		return nil, err
	}
	if ps.State, err = d.getSecret(ctx, names.StateSecret); err != nil {
		return nil, err
	}
	// A malformed device_ips only loses the addresses; the name still counts.
	ps.Device, _ = proxyset.DeviceFromState(ps.State)
	return ps, nil
}

func (d *Deps) getSecret(ctx context.Context, name string) (*corev1.Secret, error) {
	s, err := d.Kube.CoreV1().Secrets(d.Settings.Namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read Secret %s/%s: %w", d.Settings.Namespace, name, err)
	}
	return s, nil
}

// ClaimHostname claims a tailnet hostname for a parent. It fails, naming the
// other parent, when another parent's proxy already uses it (its config
// Secret carries the hostname label) or claimed it in this process and has
// not applied it yet. A parent's newer claim replaces its older one;
// DeleteProxy releases it.
func (d *Deps) ClaimHostname(ctx context.Context, hostname, parentType, namespace, name string) error {
	me := parentType + "/" + namespace + "/" + name
	d.claimLock.Lock()
	defer d.claimLock.Unlock()
	if d.claims == nil {
		d.claims, d.claimed = map[string]string{}, map[string]string{}
	}
	if other, ok := d.claims[hostname]; ok && other != me {
		d.waitFor(hostname, me)
		return fmt.Errorf("hostname %q is already used by %s", hostname, describeParent(other))
	}
	sel := labels.SelectorFromSet(labels.Set{proxystate.LabelManaged: "true", LabelHostname: hostname}).String()
	list, err := d.Kube.CoreV1().Secrets(d.Settings.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return fmt.Errorf("list config Secrets: %w", err)
	}
	mine := proxyset.ChildLabels(parentType, namespace, name)
	for _, s := range list.Items {
		l := s.Labels
		if l[proxystate.LabelParentType] == parentType && l[proxystate.LabelParentNamespace] == namespace &&
			l[proxystate.LabelParentName] == mine[proxystate.LabelParentName] {
			continue
		}
		d.waitFor(hostname, me)
		return fmt.Errorf("hostname %q is already used by %s", hostname,
			describeParent(l[proxystate.LabelParentType]+"/"+l[proxystate.LabelParentNamespace]+"/"+l[proxystate.LabelParentName]))
	}
	if old, ok := d.claimed[me]; ok && old != hostname {
		delete(d.claims, old)
		// The old name is free once this parent's config Secret carries
		// the new one: wake its waiters a little later.
		d.wake(old, renameSettle)
	}
	d.claims[hostname], d.claimed[me] = me, hostname
	return nil
}

func (d *Deps) releaseHostname(parentType, namespace, name string) {
	me := parentType + "/" + namespace + "/" + name
	d.claimLock.Lock()
	defer d.claimLock.Unlock()
	if h, ok := d.claimed[me]; ok {
		delete(d.claims, h)
		delete(d.claimed, me)
		d.wake(h, 0)
	}
}

// renameSettle is how long after a parent moved to another hostname the
// parents waiting for its old one are handled again.
const renameSettle = 2 * time.Second

// waitFor records that parent waits for hostname (claimLock held).
func (d *Deps) waitFor(hostname, parent string) {
	if d.waiters == nil {
		d.waiters = map[string][]string{}
	}
	if !slices.Contains(d.waiters[hostname], parent) {
		d.waiters[hostname] = append(d.waiters[hostname], parent)
	}
}

// wake handles again, after delay, the parents waiting for hostname
// (claimLock held).
func (d *Deps) wake(hostname string, delay time.Duration) {
	for _, p := range d.waiters[hostname] {
		d.enqueueParentKey(p, delay)
	}
	delete(d.waiters, hostname)
}

func describeParent(key string) string {
	typ, rest, _ := strings.Cut(key, "/")
	if typ == proxyset.ParentIngress {
		return "Ingress " + rest
	}
	return "Service " + rest
}

// ProxyClassFor returns the ProxyClass named name, nil and a waiting message
// when it is missing or not Ready. An empty name means none: (nil, "", nil).
func (d *Deps) ProxyClassFor(ctx context.Context, name string) (*v1alpha1.ProxyClass, string, error) {
	if name == "" {
		return nil, "", nil
	}
	obj, err := d.Dyn.Resource(ProxyClasses).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, proxyclass.NotReadyMessage(name, nil), nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("read ProxyClass %s: %w", name, err)
	}
	pc := &v1alpha1.ProxyClass{}
	if err := kruntime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, pc); err != nil {
		return nil, "", fmt.Errorf("decode ProxyClass %s: %w", name, err)
	}
	if !proxyclass.Ready(pc) {
		return nil, proxyclass.NotReadyMessage(name, pc), nil
	}
	return pc, "", nil
}

// ApplyProxy applies a proxy's objects with server-side apply, after
// applying the ProxyClass (nil: none) to the StatefulSet. The config Secret
// gets the hostname label (LabelHostname) ClaimHostname looks for, the state
// Secret the role label of kind (LabelProxyRole). A ProxyClass with
// metrics.enable also gets the proxy a metrics Service (and ServiceMonitor).
func (d *Deps) ApplyProxy(ctx context.Context, objs *proxyset.Objects, pc *v1alpha1.ProxyClass, kind proxyclass.ProxyKind, hostname string, extra ...any) error {
	sts := objs.StatefulSet
	if pc != nil {
		sts = proxyclass.Apply(sts, pc, kind)
	}
	if objs.ConfigSecret.Labels == nil {
		objs.ConfigSecret.Labels = map[string]string{}
	}
	objs.ConfigSecret.Labels[LabelHostname] = hostname
	if objs.StateSecret.Labels == nil {
		objs.StateSecret.Labels = map[string]string{}
	}
	objs.StateSecret.Labels[LabelProxyRole] = roleOf(kind)
	// The state Secret first: its role label is what makes the parent keep
	// its handlers (HasProxy) until DeleteProxy removed it, last.
	list := []any{objs.StateSecret, objs.ServiceAccount, objs.Role, objs.RoleBinding, objs.ConfigSecret}
	list = append(list, extra...)
	list = append(list, sts)
	for _, o := range list {
		if err := d.apply(ctx, o); err != nil {
			return err
		}
	}
	return d.applyMetrics(ctx, sts, pc, kind)
}

// Apply server-side applies one typed object (TypeMeta set) under the
// operator's field manager, skipping an identical apply sent within the last
// minute.
func (d *Deps) Apply(ctx context.Context, obj any) error { return d.apply(ctx, obj) }

// apply server-side applies one typed object (TypeMeta set).
func (d *Deps) apply(ctx context.Context, obj any) error {
	u, gvr, err := ToUnstructured(obj)
	if err != nil {
		return err
	}
	return d.applyUnstructured(ctx, u, gvr)
}

// applyUnstructured server-side applies u as a gvr, skipping an identical
// apply sent within the last minute.
func (d *Deps) applyUnstructured(ctx context.Context, u *unstructured.Unstructured, gvr schema.GroupVersionResource) error {
	unstructured.RemoveNestedField(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u.Object, "spec", "template", "metadata", "creationTimestamp")
	key := gvr.String() + "/" + u.GetNamespace() + "/" + u.GetName()
	body, err := json.Marshal(u.Object)
	if err != nil {
		return fmt.Errorf("encode %s: %w", key, err)
	}
	sum := sha256.Sum256(body)
	if d.applied.fresh(key, sum) {
		return nil
	}
	if _, err := runtime.Apply(ctx, d.Dyn, gvr, u, FieldManager); err != nil {
		d.applied.forget(key)
		return fmt.Errorf("apply %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	d.applied.remember(key, sum)
	return nil
}

// ToUnstructured converts a typed object with TypeMeta set and returns its
// resource.
func ToUnstructured(obj any) (*unstructured.Unstructured, schema.GroupVersionResource, error) {
	m, err := kruntime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, schema.GroupVersionResource{}, fmt.Errorf("convert %T: %w", obj, err)
	}
	u := &unstructured.Unstructured{Object: m}
	gvk := u.GroupVersionKind()
	gvr, ok := resourceOf[gvk.Kind]
	if !ok {
		return nil, gvr, fmt.Errorf("convert %T: unknown kind %q", obj, gvk.Kind)
	}
	return u, gvr, nil
}

var resourceOf = map[string]schema.GroupVersionResource{
	"Service": Services, "Secret": Secrets, "ServiceAccount": ServiceAccounts, "StatefulSet": StatefulSets,
	"Role": Roles, "RoleBinding": RoleBindings, "Ingress": Ingresses, "IngressClass": IngressClasses,
	"ProxyClass": ProxyClasses, "RoutingPlugin": RoutingPlugins,
}

// DeleteProxy removes a parent's proxy: the StatefulSet first (so the proxy
// stops), then its device through the tailnet API (404 counts as done), then
// every other object, the state Secret last (see LabelProxyRole). It is
// idempotent; the proxy's Services (egress headless, metrics) go too.
func (d *Deps) DeleteProxy(ctx context.Context, parentType, namespace, name string) error {
	ns := d.Settings.Namespace
	names := proxyset.NamesFor(parentType, namespace, name)
	bg := metav1.DeletePropagationBackground
	opts := metav1.DeleteOptions{PropagationPolicy: &bg}
	if err := ignoreNotFound(d.Kube.AppsV1().StatefulSets(ns).Delete(ctx, names.Base, opts)); err != nil {
		return fmt.Errorf("delete StatefulSet %s/%s: %w", ns, names.Base, err)
	}
	ps, err := d.ReadProxy(ctx, parentType, namespace, name)
	if err != nil {
		return err
	}
	if ps.Device.ID != "" {
		if err := d.Backend.DeleteDevice(ctx, ps.Device.ID); err != nil {
			return fmt.Errorf("tailnet API: %w", err)
		}
	}
	// Before the config Secret goes: its key, if never used, and any key
	// minted for this proxy and never recorded must not stay valid.
	if err := d.revokeUnusedKeys(ctx, names); err != nil {
		return err
	}
	sel := labels.SelectorFromSet(proxyset.ChildLabels(parentType, namespace, name)).String()
	secrets, err := d.Kube.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return fmt.Errorf("list Secrets of %s: %w", names.Base, err)
	}
	var errs []error
	for _, s := range secrets.Items {
		if s.Name != names.StateSecret {
			errs = append(errs, ignoreNotFound(d.Kube.CoreV1().Secrets(ns).Delete(ctx, s.Name, opts)))
		}
	}
	services, err := d.Kube.CoreV1().Services(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return fmt.Errorf("list Services of %s: %w", names.Base, err)
	}
	for _, s := range services.Items {
		errs = append(errs, ignoreNotFound(d.Kube.CoreV1().Services(ns).Delete(ctx, s.Name, opts)))
	}
	errs = append(errs,
		ignoreNotFound(d.Kube.RbacV1().RoleBindings(ns).Delete(ctx, names.Base, opts)),
		ignoreNotFound(d.Kube.RbacV1().Roles(ns).Delete(ctx, names.Base, opts)),
		ignoreNotFound(d.Kube.CoreV1().ServiceAccounts(ns).Delete(ctx, names.Base, opts)))
	d.applied.forgetProxy(ns, names.Base)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("delete proxy %s: %w", names.Base, err)
	}
	if err := ignoreNotFound(d.Kube.CoreV1().Secrets(ns).Delete(ctx, names.StateSecret, opts)); err != nil {
		return fmt.Errorf("delete state Secret %s/%s: %w", ns, names.StateSecret, err)
	}
	d.releaseHostname(parentType, namespace, name)
	return nil
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// Retry turns a failure into the runtime's retry semantics: tailnet API
// errors worth retrying (quota, 5xx, network) back off exponentially from 5s
// with the attempt number; refusals (credentials, tags) wait 5 minutes for
// the configuration to change; anything else is retried by the runtime's
// own backoff.
func Retry(err error, attempt int) error {
	var apiErr *tailnet.Error
	if !errors.As(err, &apiErr) {
		return err
	}
	if tailnet.Temporary(err) {
		delay := 5 * time.Second
		for i := 0; i < attempt && delay < 5*time.Minute; i++ {
			delay *= 2
		}
		return runtime.Temporary(err, min(delay, 5*time.Minute))
	}
	return runtime.Temporary(err, 5*time.Minute)
}

// trimMessage keeps conditions readable.
func trimMessage(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 1000 {
		s = s[:997] + "..."
	}
	return s
}

// HostnameRetry is how often a parent whose hostname is taken checks again.
const HostnameRetry = 30 * time.Second

// RenamePending is the condition message of a proxy whose device does not
// have its new hostname yet (the proxy renamed it; control has not).
func RenamePending(dev proxyset.Device, hostname string) string {
	want := hostname
	if _, domain, ok := strings.Cut(dev.FQDN, "."); ok {
		want += "." + domain
	}
	return fmt.Sprintf("waiting for the device to be renamed: it is still %s, not yet %s", dev.FQDN, want)
}

// ConfigError is the proxy's report that it refused its config, as a
// condition message ("" when it did not).
func ConfigError(ps *ProxyState) string {
	if ps.State == nil || len(ps.State.Data[proxystate.KeyConfigError]) == 0 {
		return ""
	}
	return "the proxy refused its config: " + string(ps.State.Data[proxystate.KeyConfigError])
}
