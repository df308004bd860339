package service

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/tailplane/tailplane/handlers/kit"
	"github.com/tailplane/tailplane/handlers/proxyclass"
	"github.com/tailplane/tailplane/handlers/proxyset"
	"github.com/tailplane/tailplane/runtime"
)

// Role is the value of kit.AnnotationProxy on Services with an L4 proxy.
const Role = "ingress-l4"

// ReasonInvalidService is the official Warning Event reason for refused
// Services.
const ReasonInvalidService = "INVALIDSERVICE"

// messagePending is the official ProxyPending message before the device is
// known.
const messagePending = "no Tailscale hostname known yet, waiting for proxy pod to finish auth"

type module struct{ d *kit.Deps }

// Register adds the Service handlers to the runtime: create, update and
// resume apply the proxy; delete (and a Service that stopped asking for a
// proxy) removes the device, the proxy's objects, then the finalizer.
// Services that never asked for a proxy match no handler and are never
// touched.
func Register(op *runtime.Operator, d *kit.Deps) {
	m := &module{d: d}
	ours := runtime.Or(m.isOurs, kit.HasMark(Role))
	op.OnCreate(kit.Services, "service-create", m.handle, d.Scope(runtime.When(ours))...)
	op.OnUpdate(kit.Services, "service-update", m.handle, d.Scope(runtime.When(ours))...)
	op.OnResume(kit.Services, "service-resume", m.handle, d.Scope(runtime.When(ours))...)
	op.OnDelete(kit.Services, "service-cleanup", m.cleanup, d.Scope(runtime.When(ours))...)
	d.OnResync(proxyset.ParentService, m.resync)
}

func (m *module) isOurs(obj *unstructured.Unstructured) bool {
	var svc corev1.Service
	if kit.FromUnstructured(obj, &svc) != nil {
		return false
	}
	return Classify(&svc, m.d.Settings.DefaultLoadBalancer) != NotOurs
}

func (m *module) handle(ctx context.Context, ev *runtime.Event) (any, error) {
	unlock := m.d.Lock(proxyset.ParentService, ev.Object.GetNamespace(), ev.Object.GetName())
	defer unlock()
	return nil, kit.Retry(m.sync(ctx, ev.Object, ev.Patch), ev.Retry)
}

func (m *module) cleanup(ctx context.Context, ev *runtime.Event) (any, error) {
	unlock := m.d.Lock(proxyset.ParentService, ev.Object.GetNamespace(), ev.Object.GetName())
	defer unlock()
	if err := m.d.DeleteProxy(ctx, proxyset.ParentService, ev.Object.GetNamespace(), ev.Object.GetName()); err != nil {
		return nil, kit.Retry(err, ev.Retry)
	}
	return nil, nil
}

// resync re-handles a Service after its proxy's state or ProxyClass changed.
func (m *module) resync(ctx context.Context, namespace, name string) error {
	unlock := m.d.Lock(proxyset.ParentService, namespace, name)
	defer unlock()
	obj, err := m.d.Dyn.Resource(kit.Services).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read Service %s/%s: %w", namespace, name, err)
	}
	if obj.GetDeletionTimestamp() != nil || !(m.isOurs(obj) || kit.HasMark(Role)(obj)) {
		return nil
	}
	return m.sync(ctx, obj, nil)
}

// sync brings the Service's proxy and status in line with the Service.
func (m *module) sync(ctx context.Context, obj *unstructured.Unstructured, patch *runtime.Patch) error {
	var svc corev1.Service
	if err := kit.FromUnstructured(obj, &svc); err != nil {
		return runtime.Permanent(err)
	}
	svc.APIVersion, svc.Kind = "v1", "Service"
	s := m.d.Settings
	kind := Classify(&svc, s.DefaultLoadBalancer)
	if kind == NotOurs {
		return m.release(ctx, &svc, obj, patch)
	}
	if problems := Validate(&svc, s); len(problems) > 0 {
		msg := "unable to provision proxy resources: invalid Service: " + strings.Join(problems, " ")
		m.d.Post(&svc, corev1.EventTypeWarning, ReasonInvalidService, msg)
		return m.setStatus(ctx, &svc, kind, ReasonProxyInvalid, msg, proxyset.Device{})
	}
	hostname, _ := Hostname(&svc)
	tags, _ := proxyset.Tags(svc.Annotations, s.ProxyTags)
	pc, waiting, err := m.d.ProxyClassFor(ctx, ProxyClassName(&svc, s))
	if err != nil {
		return err
	}
	if waiting != "" {
		return m.setStatus(ctx, &svc, kind, ReasonProxyPending, waiting, proxyset.Device{})
	}
	if err := m.d.SetMark(ctx, kit.Services, obj, Role, patch); err != nil {
		return err
	}
	if err := m.d.ClaimHostname(ctx, hostname, proxyset.ParentService, svc.Namespace, svc.Name); err != nil {
		msg := "unable to provision proxy resources: invalid Service: " + err.Error()
		m.d.Post(&svc, corev1.EventTypeWarning, ReasonInvalidService, msg)
		if serr := m.setStatus(ctx, &svc, kind, ReasonProxyInvalid, msg, proxyset.Device{}); serr != nil {
			return serr
		}
		// Retried: the other parent may give the name up.
		return runtime.Temporary(err, kit.HostnameRetry)
	}
	ps, err := m.d.ReadProxy(ctx, proxyset.ParentService, svc.Namespace, svc.Name)
	if err != nil {
		return err
	}
	key, err := m.d.AuthKey(ctx, ps, tags)
	if err != nil {
		m.d.Post(&svc, corev1.EventTypeWarning, ReasonProxyFailed, err.Error())
		return errors.Join(err, m.setStatus(ctx, &svc, kind, ReasonProxyFailed, err.Error(), proxyset.Device{}))
	}
	objs, err := Render(&svc, s, m.d.Backend.LoginServer(), key)
	if err != nil {
		return runtime.Permanent(err)
	}
	if err := m.d.ApplyProxy(ctx, objs, pc, proxyclass.L4, hostname); err != nil {
		return err
	}
	if msg := kit.ConfigError(ps); msg != "" {
		return m.setStatus(ctx, &svc, kind, ReasonProxyFailed, msg, ps.Device)
	}
	if ps.Device.FQDN == "" {
		return m.setStatus(ctx, &svc, kind, ReasonProxyPending, messagePending, proxyset.Device{})
	}
	return m.setStatus(ctx, &svc, kind, ReasonProxyCreated, ReasonProxyCreated, ps.Device)
}

// release removes the proxy of a Service that no longer asks for one
// (annotation removed, class switched away), with its condition and the
// LoadBalancer addresses it had written, then the mark.
func (m *module) release(ctx context.Context, svc *corev1.Service, obj *unstructured.Unstructured, patch *runtime.Patch) error {
	ps, err := m.d.ReadProxy(ctx, proxyset.ParentService, svc.Namespace, svc.Name)
	if err != nil {
		return err
	}
	if err := m.d.DeleteProxy(ctx, proxyset.ParentService, svc.Namespace, svc.Name); err != nil {
		return err
	}
	status := map[string]any{}
	if c := kit.RemoveCondition(svc.Status.Conditions, ConditionProxyReady); len(c) != len(svc.Status.Conditions) {
		status["conditions"] = c
	}
	if ps.Device.FQDN != "" {
		ours := append([]string{ps.Device.FQDN}, ps.Device.IPs...)
		kept := slices.DeleteFunc(slices.Clone(svc.Status.LoadBalancer.Ingress), func(i corev1.LoadBalancerIngress) bool {
			return slices.Contains(ours, i.Hostname) || slices.Contains(ours, i.IP)
		})
		if len(kept) != len(svc.Status.LoadBalancer.Ingress) {
			status["loadBalancer"] = map[string]any{"ingress": kept}
		}
	}
	if len(status) > 0 {
		if err := m.d.PatchStatus(ctx, kit.Services, svc.Namespace, svc.Name, status); err != nil {
			return err
		}
	}
	return m.d.SetMark(ctx, kit.Services, obj, "", patch)
}

// setStatus writes TailscaleProxyReady and, for a tailscale LoadBalancer,
// status.loadBalancer.ingress (the FQDN, then the tailnet IPs), when they
// changed.
func (m *module) setStatus(ctx context.Context, svc *corev1.Service, kind Kind, reason, message string, dev proxyset.Device) error {
	cond := metav1.Condition{Type: ConditionProxyReady, Status: metav1.ConditionFalse, Reason: reason, Message: message}
	if reason == ReasonProxyCreated {
		cond.Status = metav1.ConditionTrue
	}
	conds := kit.SetCondition(svc.Status.Conditions, cond)
	status := map[string]any{}
	if !reflect.DeepEqual(conds, svc.Status.Conditions) {
		status["conditions"] = conds
	}
	if kind == LoadBalancer {
		lb, err := LoadBalancerIngress(svc, dev)
		if err != nil {
			return runtime.Permanent(err)
		}
		if !reflect.DeepEqual(lb, svc.Status.LoadBalancer.Ingress) && !(len(lb) == 0 && len(svc.Status.LoadBalancer.Ingress) == 0) {
			status["loadBalancer"] = map[string]any{"ingress": lb}
		}
	}
	if len(status) == 0 {
		return nil
	}
	return m.d.PatchStatus(ctx, kit.Services, svc.Namespace, svc.Name, status)
}
