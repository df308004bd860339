package dnsconfig

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/tailplane/tailplane/crds/tailscale/v1alpha1"
	"github.com/tailplane/tailplane/handlers/lib/cluster"
	"github.com/tailplane/tailplane/handlers/lib/conditions"
	"github.com/tailplane/tailplane/handlers/lib/resources"
	"github.com/tailplane/tailplane/internal/nameserver"
	"github.com/tailplane/tailplane/internal/proxystate"
	"github.com/tailplane/tailplane/runtime"
)

// indexAll lists every DNSConfig under one key, for the watches of the
// records' sources (which cannot read the API server).
const indexAll = "dnsconfigs-all"

type module struct {
	d *cluster.Deps
	// mu makes one DNSConfig's list-render-apply one step: the records of
	// two handlers at once must not overwrite each other with older ones.
	mu sync.Mutex
}

// Register adds the DNSConfig handlers: any change of a DNSConfig, and any
// change of a proxy Pod, an Ingress or a Service (the records' sources),
// applies the nameserver's objects with the current records and sets
// NameserverReady and status.nameserver.ip; deleting the DNSConfig deletes
// them (the finalizer holds it until then).
func Register(op *runtime.Operator, d *cluster.Deps) {
	m := &module{d: d}
	op.Index(resources.DNSConfigs, indexAll, func(obj *unstructured.Unstructured) map[string]any {
		return map[string]any{"all": "/" + obj.GetName()}
	})
	op.On(resources.DNSConfigs, "dnsconfig", m.handle,
		runtime.Causes(runtime.CauseCreate, runtime.CauseUpdate, runtime.CauseResume, runtime.CauseEnqueue))
	op.OnDelete(resources.DNSConfigs, "dnsconfig-delete", m.remove)
	all := func(watch.EventType, *unstructured.Unstructured, *unstructured.Unstructured) []runtime.Key {
		return d.Indexed(indexAll, "all", resources.DNSConfigs)
	}
	// Proxy Pods count when they come, go, or change readiness or IPs (not
	// on every status update); Ingresses when their hostname changes.
	op.Watch(resources.Pods, "dnsconfig-records-pods", func(typ watch.EventType, old, obj *unstructured.Unstructured) []runtime.Key {
		if typ == watch.Modified && old != nil && sameRecord(old, obj, "status", "podIPs") && sameRecord(old, obj, "status", "conditions") &&
			(old.GetDeletionTimestamp() == nil) == (obj.GetDeletionTimestamp() == nil) {
			return nil
		}
		return all(typ, old, obj)
	}, runtime.Namespace(d.Settings.Namespace), runtime.Selector(proxystate.LabelManaged+"=true"))
	op.Watch(resources.Ingresses, "dnsconfig-records-ingresses", func(typ watch.EventType, old, obj *unstructured.Unstructured) []runtime.Key {
		if typ == watch.Modified && old != nil && sameRecord(old, obj, "status", "loadBalancer") {
			return nil
		}
		return all(typ, old, obj)
	}, d.Scope()...)
	op.Watch(resources.Services, "dnsconfig-records-group-egress", all,
		runtime.Namespace(d.Settings.Namespace), runtime.Selector(LabelSvcType+"="+svcTypeEgress))
	// Only egress Services to a tailnet FQDN name records (the filter
	// sees the old state too, so removing the annotation counts).
	op.Watch(resources.Services, "dnsconfig-records-services", all,
		d.Scope(runtime.Annotation(AnnotationTailnetFQDN, runtime.Present()))...)
}

func decode(obj *unstructured.Unstructured) (*v1alpha1.DNSConfig, error) {
	var dc v1alpha1.DNSConfig
	if err := cluster.FromUnstructured(obj, &dc); err != nil {
		return nil, runtime.Permanent(err)
	}
	dc.APIVersion, dc.Kind = v1alpha1.GroupVersion.String(), "DNSConfig"
	if dc.Spec.Nameserver == nil {
		dc.Spec.Nameserver = &v1alpha1.Nameserver{}
	}
	return &dc, nil
}

func (m *module) handle(ctx context.Context, ev *runtime.Event) (any, error) {
	dc, err := decode(ev.Object)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	others, err := m.others(ctx, dc.Name)
	if err != nil {
		return nil, err
	}
	if len(others) > 0 {
		// The objects have fixed names: two DNSConfigs would fight over
		// them. Every one of them says so until one is left.
		if ev.Cause != runtime.CauseEnqueue {
			if m.changed(dc, metav1.ConditionFalse, ReasonMultiple, MessageMultiple) {
				m.d.Post(dc, corev1.EventTypeWarning, ReasonMultiple, MessageMultiple)
			}
			for _, o := range others {
				m.d.Op.Enqueue(resources.DNSConfigs, o, 0)
			}
		}
		return nil, m.status(ctx, dc, metav1.ConditionFalse, ReasonMultiple, MessageMultiple, "")
	}
	ip, err := m.apply(ctx, dc)
	if err != nil {
		msg := fmt.Sprintf(MessageCreationFailed, err)
		if m.changed(dc, metav1.ConditionFalse, ReasonCreationFailed, msg) {
			m.d.Post(dc, corev1.EventTypeWarning, ReasonCreationFailed, msg)
		}
		if serr := m.status(ctx, dc, metav1.ConditionFalse, ReasonCreationFailed, msg, ""); serr != nil {
			m.d.Log.Warn("DNSConfig status not written", "dnsconfig", dc.Name, "err", serr)
		}
		return nil, err
	}
	if ip == "" {
		return nil, runtime.Temporary(fmt.Errorf("the nameserver Service %s/%s has no ClusterIP yet", m.d.Settings.Namespace, Name), time.Second)
	}
	if ev.Cause == runtime.CauseCreate {
		m.d.Post(dc, corev1.EventTypeNormal, ReasonCreated, fmt.Sprintf("nameserver running in namespace %s at %s", m.d.Settings.Namespace, ip))
	}
	return nil, m.status(ctx, dc, metav1.ConditionTrue, ReasonCreated, ReasonCreated, ip)
}

// others returns the names of the live DNSConfigs other than name.
func (m *module) others(ctx context.Context, name string) ([]string, error) {
	list, err := m.d.Dyn.Resource(resources.DNSConfigs).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list DNSConfigs: %w", err)
	}
	var out []string
	for _, o := range list.Items {
		if o.GetName() != name && o.GetDeletionTimestamp() == nil {
			out = append(out, o.GetName())
		}
	}
	return out, nil
}

// apply writes the nameserver's objects with the current records and
// returns the Service's ClusterIP.
func (m *module) apply(ctx context.Context, dc *v1alpha1.DNSConfig) (string, error) {
	recs, err := m.records(ctx)
	if err != nil {
		return "", err
	}
	data, err := recs.Encode()
	if err != nil {
		return "", err
	}
	for _, obj := range Render(dc, m.d.Settings, data) {
		if err := m.d.Apply(ctx, obj); err != nil {
			return "", err
		}
	}
	svc, err := m.d.Kube.CoreV1().Services(m.d.Settings.Namespace).Get(ctx, Name, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("read the nameserver Service: %w", err)
	}
	if ip := svc.Spec.ClusterIP; ip != corev1.ClusterIPNone {
		return ip, nil
	}
	return "", nil
}

// records reads the proxy Pods and their parents and returns the records.
func (m *module) records(ctx context.Context) (nameserver.Records, error) {
	pods, err := m.d.Kube.CoreV1().Pods(m.d.Settings.Namespace).List(ctx, metav1.ListOptions{LabelSelector: proxystate.LabelManaged + "=true"})
	if err != nil {
		return nameserver.Records{}, fmt.Errorf("list proxy Pods: %w", err)
	}
	parents := Parents{Services: map[types.NamespacedName]*corev1.Service{}, Ingresses: map[types.NamespacedName]*networkingv1.Ingress{}}
	for _, p := range pods.Items {
		key := ParentOf(&p)
		ns, name := key.Namespace, key.Name
		switch p.Labels[proxystate.LabelParentType] {
		case "svc":
			if _, seen := parents.Services[key]; seen {
				continue
			}
			svc, err := m.d.Kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return nameserver.Records{}, fmt.Errorf("read Service %s: %w", key, err)
			}
			if err == nil {
				parents.Services[key] = svc
			}
		case "ingress":
			if _, seen := parents.Ingresses[key]; seen {
				continue
			}
			ing, err := m.d.Kube.NetworkingV1().Ingresses(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return nameserver.Records{}, fmt.Errorf("read Ingress %s: %w", key, err)
			}
			if err == nil {
				parents.Ingresses[key] = ing
			}
		}
	}
	group, err := m.d.Kube.CoreV1().Services(m.d.Settings.Namespace).List(ctx, metav1.ListOptions{LabelSelector: LabelSvcType + "=" + svcTypeEgress})
	if err != nil {
		return nameserver.Records{}, fmt.Errorf("list the cluster Services of egress ProxyGroup members: %w", err)
	}
	parents.GroupEgress = group.Items
	return Records(pods.Items, parents), nil
}

// changed reports whether NameserverReady would change: its Warning Event
// goes with a change only, not again at each restart.
func (m *module) changed(dc *v1alpha1.DNSConfig, st metav1.ConditionStatus, reason, msg string) bool {
	return conditions.Changed(dc.Status.Conditions, nameserverReady(dc, st, reason, msg))
}

func nameserverReady(dc *v1alpha1.DNSConfig, st metav1.ConditionStatus, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: v1alpha1.NameserverReady, Status: st, Reason: reason, Message: msg, ObservedGeneration: dc.Generation}
}

// status sets NameserverReady (and the IP, "" to clear it) when changed.
func (m *module) status(ctx context.Context, dc *v1alpha1.DNSConfig, st metav1.ConditionStatus, reason, msg, ip string) error {
	cond := nameserverReady(dc, st, reason, msg)
	conds := conditions.Set(dc.Status.Conditions, cond)
	have := ""
	if dc.Status.Nameserver != nil {
		have = dc.Status.Nameserver.IP
	}
	if reflect.DeepEqual(conds, dc.Status.Conditions) && have == ip {
		return nil
	}
	var nsStatus any
	if ip != "" {
		nsStatus = map[string]any{"ip": ip}
	}
	return m.d.PatchStatus(ctx, resources.DNSConfigs, "", dc.Name, map[string]any{"conditions": conds, "nameserver": nsStatus})
}

// remove deletes the nameserver's objects when no other DNSConfig is left
// (the others then take them over), and hands them over otherwise.
func (m *module) remove(ctx context.Context, ev *runtime.Event) (any, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	others, err := m.others(ctx, ev.Object.GetName())
	if err != nil {
		return nil, err
	}
	if len(others) > 0 {
		for _, o := range others {
			m.d.Op.Enqueue(resources.DNSConfigs, o, 0)
		}
		return nil, nil
	}
	ns := m.d.Settings.Namespace
	for _, o := range []struct {
		gvr  schema.GroupVersionResource
		name string
	}{{resources.Services, Name}, {resources.Deployments, Name}, {resources.ConfigMaps, nameserver.ConfigMapName}, {resources.ServiceAccounts, Name}} {
		m.d.Forget(o.gvr, ns, o.name)
		err := m.d.Dyn.Resource(o.gvr).Namespace(ns).Delete(ctx, o.name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("delete %s %s/%s: %w", o.gvr.Resource, ns, o.name, err)
		}
	}
	return nil, nil
}

// sameRecord reports whether the field at path is equal in a and b.
func sameRecord(a, b *unstructured.Unstructured, path ...string) bool {
	va, _, _ := unstructured.NestedFieldNoCopy(a.Object, path...)
	vb, _, _ := unstructured.NestedFieldNoCopy(b.Object, path...)
	return reflect.DeepEqual(va, vb)
}
