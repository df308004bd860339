package cluster

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/tailplane/tailplane/crds/tailscale/v1alpha1"
	"github.com/tailplane/tailplane/handlers/lib/proxyclassrules"
	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/handlers/lib/resources"
	"github.com/tailplane/tailplane/internal/tailnet"
	"github.com/tailplane/tailplane/runtime"
)

// ProxyClassFor returns the ProxyClass named name, nil and a waiting message
// when it is missing or not Ready. An empty name means none: (nil, "", nil).
//
// It reads the informer's copy (IndexProxyClasses) once the class's
// ProxyClassReady condition was decided for its generation, and the API
// server otherwise: a class just created or changed, whose condition the
// proxyclass handler has just written, must be seen with it (the handler
// re-handles the class's users right after writing it, before the watch
// may have brought it).
func (d *Deps) ProxyClassFor(ctx context.Context, name string) (*v1alpha1.ProxyClass, string, error) {
	if name == "" {
		return nil, "", nil
	}
	pc, err := d.cachedProxyClass(name)
	if err != nil {
		return nil, "", err
	}
	if pc == nil || !proxyclassrules.Decided(pc) {
		var found bool
		if pc, found, err = d.readProxyClass(ctx, name); err != nil {
			return nil, "", err
		}
		if !found {
			return nil, proxyclassrules.NotReadyMessage(name, nil), nil
		}
	}
	if !proxyclassrules.Ready(pc) {
		return nil, proxyclassrules.NotReadyMessage(name, pc), nil
	}
	return pc, "", nil
}

// cachedProxyClass is a copy of the ProxyClass name as IndexProxyClasses
// holds it; nil when the index does not (or is not registered).
func (d *Deps) cachedProxyClass(name string) (*v1alpha1.ProxyClass, error) {
	x := d.Op.GetIndex(IndexProxyClasses)
	if x == nil {
		return nil, nil
	}
	values := x.Get(name)
	if len(values) == 0 {
		return nil, nil
	}
	switch v := values[0].(type) {
	case *v1alpha1.ProxyClass:
		return v.DeepCopy(), nil
	case error:
		return nil, v
	default:
		return nil, fmt.Errorf("ProxyClass %s: index holds a %T", name, v)
	}
}

// readProxyClass reads the ProxyClass name from the API server.
func (d *Deps) readProxyClass(ctx context.Context, name string) (*v1alpha1.ProxyClass, bool, error) {
	obj, err := d.Dyn.Resource(resources.ProxyClasses).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read ProxyClass %s: %w", name, err)
	}
	pc, err := decodeProxyClass(obj)
	return pc, err == nil, err
}

func decodeProxyClass(obj *unstructured.Unstructured) (*v1alpha1.ProxyClass, error) {
	pc := &v1alpha1.ProxyClass{}
	if err := kruntime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, pc); err != nil {
		return nil, fmt.Errorf("decode ProxyClass %s: %w", obj.GetName(), err)
	}
	return pc, nil
}

// ApplyProxy applies a proxy's objects with server-side apply, after
// applying the ProxyClass (nil: none) to the StatefulSet: the replicas'
// state Secrets first (their role label is what keeps the parent's
// handlers, see proxyset.LabelProxyRole), the StatefulSet last. Each
// replica's config Secret gets its hostname (hostnames, in ordinal order)
// in LabelHostname, which hostname claims look for. A ProxyClass with
// metrics.enable also gets the proxy a metrics Service (and ServiceMonitor).
func (d *Deps) ApplyProxy(ctx context.Context, objs *proxyset.Objects, pc *v1alpha1.ProxyClass, kind proxyclassrules.ProxyKind, hostnames []string, extra ...any) error {
	sts := objs.StatefulSet
	if pc != nil {
		sts = proxyclassrules.Apply(sts, pc, kind)
	}
	for i, r := range objs.Replicas {
		if i < len(hostnames) {
			r.ConfigSecret.Labels[LabelHostname] = hostnames[i]
		}
	}
	list := objs.List()
	list = append(list[:len(list)-1], extra...)
	list = append(list, sts)
	for _, o := range list {
		if err := d.apply(ctx, o); err != nil {
			return err
		}
	}
	return d.applyMetrics(ctx, sts, pc, kind)
}

// ForgetProxy forgets what was applied of the proxy named base, after it
// was deleted, so that a new one is applied in full.
func (d *Deps) ForgetProxy(namespace, base string) { d.applied.forgetProxy(namespace, base) }

// Forget makes the next Apply of the object send it even if identical:
// callers that delete an object they applied call it, so that applying it
// again within the minute recreates it.
func (d *Deps) Forget(gvr schema.GroupVersionResource, namespace, name string) {
	d.applied.forget(gvr.String() + "/" + namespace + "/" + name)
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
	refresh := cmp.Or(d.ApplyRefresh, appliedTTL)
	if d.applied.fresh(key, sum, refresh) {
		return nil
	}
	if d.applied.sent(key, sum) {
		// The same as last time: written only if the live object lost it.
		live, err := d.Dyn.Resource(gvr).Namespace(u.GetNamespace()).Get(ctx, u.GetName(), metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("read %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
		}
		if err == nil && holds(live.Object, u.Object) {
			d.applied.remember(key, sum)
			return nil
		}
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
	gvr, ok := resources.OfKind(gvk.Kind)
	if !ok {
		return nil, gvr, fmt.Errorf("convert %T: unknown kind %q", obj, gvk.Kind)
	}
	return u, gvr, nil
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
