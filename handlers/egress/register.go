package egress

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tailplane/tailplane/handlers/kit"
	"github.com/tailplane/tailplane/handlers/proxyclass"
	"github.com/tailplane/tailplane/handlers/proxyset"
	"github.com/tailplane/tailplane/runtime"
)

// Role is the role of egress proxies.
const Role = kit.RoleEgress

// Condition and reasons on egress Services: the single-proxy Service ones.
const (
	conditionProxyReady  = "TailscaleProxyReady"
	reasonProxyCreated   = "ProxyCreated"
	reasonProxyPending   = "ProxyPending"
	reasonProxyInvalid   = "ProxyInvalid"
	reasonProxyFailed    = "ProxyFailed"
	reasonInvalidService = "INVALIDSERVICE"
	messagePending       = "no Tailscale hostname known yet, waiting for proxy pod to finish auth"
)

type module struct{ d *kit.Deps }

// Register adds the egress Service handlers: the proxy and its headless
// Service are applied and the user's Service is rewritten to an ExternalName
// pointing at it; delete removes the device, the objects, then the
// finalizer. Removing the annotations removes the proxy (the Service stays an
// ExternalName, as in the official operator).
func Register(op *runtime.Operator, d *kit.Deps) {
	m := &module{d: d}
	d.RegisterProxyParent(op, kit.ProxyParent{
		ID: "egress", Type: proxyset.ParentService, Resource: kit.Services, Kind: "Service",
		Role: Role, IsOurs: m.isOurs, Sync: m.sync,
	})
}

func (m *module) isOurs(obj *unstructured.Unstructured) bool {
	var svc corev1.Service
	if kit.FromUnstructured(obj, &svc) != nil {
		return false
	}
	return IsEgress(&svc)
}

func (m *module) sync(ctx context.Context, obj *unstructured.Unstructured, patch *runtime.Patch) error {
	var svc corev1.Service
	if err := kit.FromUnstructured(obj, &svc); err != nil {
		return runtime.Permanent(err)
	}
	svc.APIVersion, svc.Kind = "v1", "Service"
	s := m.d.Settings
	if !IsEgress(&svc) {
		// Released: condition first, then the proxy, whose end lets the
		// runtime remove the finalizer.
		if c := kit.RemoveCondition(svc.Status.Conditions, conditionProxyReady); len(c) != len(svc.Status.Conditions) {
			if err := m.d.PatchStatus(ctx, kit.Services, svc.Namespace, svc.Name, map[string]any{"conditions": c}); err != nil {
				return err
			}
		}
		if err := m.d.DeleteProxy(ctx, proxyset.ParentService, svc.Namespace, svc.Name); err != nil {
			return err
		}
		return m.d.WaitProxyGone(ctx, Role, proxyset.ParentService, svc.Namespace, svc.Name)
	}
	if problems := Validate(&svc, s); len(problems) > 0 {
		msg := "unable to provision proxy resources: invalid Service: " + strings.Join(problems, " ")
		m.d.Post(&svc, corev1.EventTypeWarning, reasonInvalidService, msg)
		return m.setCondition(ctx, &svc, reasonProxyInvalid, msg)
	}
	pc, waiting, err := m.d.ProxyClassFor(ctx, proxyset.ProxyClassName(svc.Labels, svc.Annotations, s.DefaultProxyClass))
	if err != nil {
		return err
	}
	if waiting != "" {
		return m.setCondition(ctx, &svc, reasonProxyPending, waiting)
	}
	cfg, err := Config(&svc, s, "", "")
	if err != nil {
		return runtime.Permanent(err)
	}
	if err := m.d.ClaimHostname(ctx, cfg.Hostname, proxyset.ParentService, svc.Namespace, svc.Name); err != nil {
		msg := "unable to provision proxy resources: invalid Service: " + err.Error()
		m.d.Post(&svc, corev1.EventTypeWarning, reasonInvalidService, msg)
		return errors.Join(m.setCondition(ctx, &svc, reasonProxyInvalid, msg), runtime.Temporary(err, kit.HostnameRetry))
	}
	ps, err := m.d.ReadProxy(ctx, proxyset.ParentService, svc.Namespace, svc.Name)
	if err != nil {
		return err
	}
	key, err := m.d.AuthKey(ctx, ps, cfg.Tags)
	if err != nil {
		m.d.Post(&svc, corev1.EventTypeWarning, reasonProxyFailed, err.Error())
		return errors.Join(m.setCondition(ctx, &svc, reasonProxyFailed, err.Error()), err)
	}
	objs, err := Render(&svc, s, m.d.Backend.LoginServer(), key)
	if err != nil {
		return runtime.Permanent(err)
	}
	if err := m.d.ApplyProxy(ctx, objs.Objects, pc, proxyclass.Egress, cfg.Hostname, objs.HeadlessService); err != nil {
		return errors.Join(err, m.setCondition(ctx, &svc, reasonProxyFailed, "failed to provision proxy: "+err.Error()))
	}
	if err := m.rewrite(ctx, &svc, ExternalName(objs.HeadlessService, m.d.ClusterDomain)); err != nil {
		return err
	}
	if ps.Device.ID == "" {
		return m.setCondition(ctx, &svc, reasonProxyPending, messagePending)
	}
	return m.setCondition(ctx, &svc, reasonProxyCreated, reasonProxyCreated)
}

// rewrite turns the user's Service into an ExternalName pointing at the
// proxy, with no selector (the API server drops the ClusterIP).
func (m *module) rewrite(ctx context.Context, svc *corev1.Service, externalName string) error {
	if svc.Spec.Type == corev1.ServiceTypeExternalName && svc.Spec.ExternalName == externalName && len(svc.Spec.Selector) == 0 {
		return nil
	}
	b, _ := json.Marshal(map[string]any{"spec": map[string]any{"type": "ExternalName", "externalName": externalName, "selector": nil}})
	if _, err := m.d.Kube.CoreV1().Services(svc.Namespace).Patch(ctx, svc.Name, types.MergePatchType, b, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("rewrite Service %s/%s to ExternalName: %w", svc.Namespace, svc.Name, err)
	}
	return nil
}

func (m *module) setCondition(ctx context.Context, svc *corev1.Service, reason, message string) error {
	cond := metav1.Condition{Type: conditionProxyReady, Status: metav1.ConditionFalse, Reason: reason, Message: message}
	if reason == reasonProxyCreated {
		cond.Status = metav1.ConditionTrue
	}
	conds := kit.SetCondition(svc.Status.Conditions, cond)
	if reflect.DeepEqual(conds, svc.Status.Conditions) {
		return nil
	}
	return m.d.PatchStatus(ctx, kit.Services, svc.Namespace, svc.Name, map[string]any{"conditions": conds})
}
