package egress

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tailplane/tailplane/handlers/lib/cluster"
	"github.com/tailplane/tailplane/handlers/lib/conditions"
	"github.com/tailplane/tailplane/handlers/lib/pipeline"
	"github.com/tailplane/tailplane/handlers/lib/proxyclassrules"
	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/handlers/lib/resources"
	"github.com/tailplane/tailplane/runtime"
)

// Role is the role of egress proxies.
const Role = cluster.RoleEgress

type module struct{ d *cluster.Deps }

// Register adds the egress module to the pipeline: the proxy and its
// headless Service are applied and the user's Service is rewritten to an
// ExternalName pointing at it; delete removes the device, the objects, then
// the finalizer. Removing the annotations removes the proxy (the Service
// stays an ExternalName, as in the official operator).
func Register(op *runtime.Operator, d *cluster.Deps, p *pipeline.Pipeline) {
	m := &module{d: d}
	p.Register(op, pipeline.Module{
		ID: "egress", Resource: resources.Services, Kind: "Service",
		ParentType: proxyset.ParentService, Role: Role, NameKey: NameKey, LegacyNameKey: proxyset.ParentService,
		ProxyKind: proxyclassrules.Egress,
		IsOurs:    m.isOurs, Plan: m.plan, Report: m.report, Release: m.release,
		Tailnet: pipeline.AnnotatedTailnet,
	})
}

func (m *module) isOurs(obj *unstructured.Unstructured) bool {
	svc, err := cluster.DecodeService(obj)
	return err == nil && IsEgress(svc)
}

// plan is Plan, and once the proxy is applied the user's Service rewritten
// to point at its headless Service.
func (m *module) plan(_ context.Context, obj *unstructured.Unstructured) (*pipeline.Plan, error) {
	svc, err := cluster.DecodeService(obj)
	if err != nil {
		return nil, err
	}
	plan := Plan(svc, m.d.Settings)
	if plan.Invalid == "" {
		plan.AfterApply = func(ctx context.Context, objs *proxyset.Objects) error {
			return m.rewrite(ctx, svc, ExternalName(Headless(svc, objs), m.d.ClusterDomain))
		}
	}
	return plan, nil
}

// report writes TailscaleProxyReady with the official reasons.
func (m *module) report(ctx context.Context, obj *unstructured.Unstructured, out pipeline.Outcome) error {
	svc, err := cluster.DecodeService(obj)
	if err != nil {
		return err
	}
	r := pipeline.ForService(out)
	if r.EventReason != "" && conditions.Changed(svc.Status.Conditions, r.Condition) {
		m.d.Post(svc, r.EventType, r.EventReason, r.EventMessage)
	}
	conds := conditions.Set(svc.Status.Conditions, r.Condition)
	if reflect.DeepEqual(conds, svc.Status.Conditions) {
		return nil
	}
	return m.d.PatchStatus(ctx, resources.Services, svc.Namespace, svc.Name, map[string]any{"conditions": conds})
}

// release removes the condition of a Service that is no longer egress.
func (m *module) release(ctx context.Context, obj *unstructured.Unstructured, _ []proxyset.Device) error {
	svc, err := cluster.DecodeService(obj)
	if err != nil {
		return err
	}
	if c := conditions.Remove(svc.Status.Conditions, pipeline.ConditionProxyReady); len(c) != len(svc.Status.Conditions) {
		return m.d.PatchStatus(ctx, resources.Services, svc.Namespace, svc.Name, map[string]any{"conditions": c})
	}
	return nil
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
