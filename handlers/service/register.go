package service

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/tailplane/tailplane/handlers/kit"
	"github.com/tailplane/tailplane/handlers/proxyclass"
	"github.com/tailplane/tailplane/handlers/proxyset"
	"github.com/tailplane/tailplane/runtime"
)

// Role is the role of the L4 proxies of exposed Services.
const Role = kit.RoleIngressL4

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
	d.RegisterProxyParent(op, kit.ProxyParent{
		ID: "service", Type: proxyset.ParentService, Resource: kit.Services, Kind: "Service",
		Role: Role, IsOurs: m.isOurs, Sync: m.sync,
	})
}

func (m *module) isOurs(obj *unstructured.Unstructured) bool {
	var svc corev1.Service
	if kit.FromUnstructured(obj, &svc) != nil {
		return false
	}
	return Classify(&svc, m.d.Settings.DefaultLoadBalancer) != NotOurs
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
		return m.release(ctx, &svc)
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
		// Shown on the Service, whole: the API server's refusal (a
		// ProxyClass value it rejects, say) is what the user must fix.
		msg := "failed to provision proxy: " + err.Error()
		return errors.Join(err, m.setStatus(ctx, &svc, kind, ReasonProxyFailed, msg, proxyset.Device{}))
	}
	if msg := kit.ConfigError(ps); msg != "" {
		return m.setStatus(ctx, &svc, kind, ReasonProxyFailed, msg, ps.Device)
	}
	if ps.Device.FQDN == "" {
		return m.setStatus(ctx, &svc, kind, ReasonProxyPending, messagePending, proxyset.Device{})
	}
	if !ps.Device.Named(hostname) {
		// Renamed: the proxy renames its device, and until control has
		// done so the old name serves and the new one does not resolve.
		return m.setStatus(ctx, &svc, kind, ReasonProxyPending, kit.RenamePending(ps.Device, hostname), proxyset.Device{})
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		// The proxy is up but would reset every connection: not Ready
		// until the name resolves, checked again meanwhile.
		if err := m.d.CheckResolves(ctx, svc.Spec.ExternalName); err != nil {
			m.d.EnqueueParent(proxyset.ParentService, svc.Namespace, svc.Name, m.d.ResolveRetry)
			return m.setStatus(ctx, &svc, kind, ReasonProxyFailed, err.Error(), proxyset.Device{})
		}
	}
	return m.setStatus(ctx, &svc, kind, ReasonProxyCreated, ReasonProxyCreated, ps.Device)
}

// release removes the condition and the LoadBalancer addresses of a Service
// that no longer asks for a proxy (annotation removed, class switched away),
// then its proxy: once the proxy is gone, the Service matches no handler and
// the runtime removes the finalizer.
func (m *module) release(ctx context.Context, svc *corev1.Service) error {
	ps, err := m.d.ReadProxy(ctx, proxyset.ParentService, svc.Namespace, svc.Name)
	if err != nil {
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
	if err := m.d.DeleteProxy(ctx, proxyset.ParentService, svc.Namespace, svc.Name); err != nil {
		return err
	}
	return m.d.WaitProxyGone(ctx, Role, proxyset.ParentService, svc.Namespace, svc.Name)
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
