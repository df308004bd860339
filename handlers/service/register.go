package service

import (
	"context"
	"reflect"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/tailplane/tailplane/handlers/lib/cluster"
	"github.com/tailplane/tailplane/handlers/lib/conditions"
	"github.com/tailplane/tailplane/handlers/lib/pipeline"
	"github.com/tailplane/tailplane/handlers/lib/proxyclassrules"
	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/handlers/lib/resources"
	"github.com/tailplane/tailplane/runtime"
)

// Role is the role of the L4 proxies of exposed Services.
const Role = cluster.RoleIngressL4

type module struct{ d *cluster.Deps }

// Register adds the exposed-Service module to the pipeline: create, update
// and resume apply the proxy; delete (and a Service that stopped asking for
// a proxy) removes the device, the proxy's objects, then the finalizer.
// Services that never asked for a proxy match no handler and are never
// touched.
func Register(op *runtime.Operator, d *cluster.Deps, p *pipeline.Pipeline) {
	m := &module{d: d}
	p.Register(op, pipeline.Module{
		ID: "service", Resource: resources.Services, Kind: "Service",
		ParentType: proxyset.ParentService, Role: Role, ProxyKind: proxyclassrules.L4,
		IsOurs: m.isOurs, Plan: m.plan, Report: m.report, Release: m.release,
		Tailnet: pipeline.AnnotatedTailnet,
	})
}

func (m *module) isOurs(obj *unstructured.Unstructured) bool {
	svc, err := cluster.DecodeService(obj)
	return err == nil && Classify(svc, ClaimOf(m.d.Settings)) != NotOurs
}

// plan is Plan, and for an ExternalName Service a check that the
// externalName resolves: the Service is not Ready before it does.
func (m *module) plan(_ context.Context, obj *unstructured.Unstructured) (*pipeline.Plan, error) {
	svc, err := cluster.DecodeService(obj)
	if err != nil {
		return nil, err
	}
	plan := Plan(svc, m.d.Settings)
	if plan.Invalid != "" {
		return plan, nil
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		// The proxy is up but would reset every connection: not Ready
		// until the name resolves, checked again meanwhile.
		plan.Check = func(ctx context.Context) (string, time.Duration) {
			if err := m.d.CheckResolves(ctx, svc.Spec.ExternalName); err != nil {
				return err.Error(), m.d.ResolveRetry
			}
			return "", 0
		}
	}
	return plan, nil
}

// report writes TailscaleProxyReady with the official reasons and, for a
// tailscale LoadBalancer, status.loadBalancer.ingress.
func (m *module) report(ctx context.Context, obj *unstructured.Unstructured, out pipeline.Outcome) error {
	svc, err := cluster.DecodeService(obj)
	if err != nil {
		return err
	}
	r := pipeline.ForService(out)
	if r.EventReason != "" && conditions.Changed(svc.Status.Conditions, r.Condition) {
		m.d.Post(svc, r.EventType, r.EventReason, r.EventMessage)
	}
	var dev proxyset.Device
	if len(out.Serving) > 0 && (out.Stage == pipeline.Ready || out.Cause == pipeline.CauseConfigError) {
		dev = out.Serving[0] // with a refused config, the previous one keeps serving
	}
	return m.setStatus(ctx, svc, r.Condition, dev)
}

// release removes the condition and the LoadBalancer addresses of a Service
// that no longer asks for a proxy (annotation removed, class switched away).
func (m *module) release(ctx context.Context, obj *unstructured.Unstructured, devices []proxyset.Device) error {
	svc, err := cluster.DecodeService(obj)
	if err != nil {
		return err
	}
	status := map[string]any{}
	if c := conditions.Remove(svc.Status.Conditions, ConditionProxyReady); len(c) != len(svc.Status.Conditions) {
		status["conditions"] = c
	}
	var ours []string
	for _, d := range devices {
		if d.FQDN != "" {
			ours = append(append(ours, d.FQDN), d.IPs...)
		}
	}
	kept := slices.DeleteFunc(slices.Clone(svc.Status.LoadBalancer.Ingress), func(i corev1.LoadBalancerIngress) bool {
		return slices.Contains(ours, i.Hostname) || slices.Contains(ours, i.IP)
	})
	if len(kept) != len(svc.Status.LoadBalancer.Ingress) {
		status["loadBalancer"] = map[string]any{"ingress": kept}
	}
	if len(status) == 0 {
		return nil
	}
	return m.d.PatchStatus(ctx, resources.Services, svc.Namespace, svc.Name, status)
}

// setStatus writes TailscaleProxyReady and, for a tailscale LoadBalancer,
// status.loadBalancer.ingress (the FQDN, then the tailnet IPs), when they
// changed.
func (m *module) setStatus(ctx context.Context, svc *corev1.Service, cond metav1.Condition, dev proxyset.Device) error {
	conds := conditions.Set(svc.Status.Conditions, cond)
	status := map[string]any{}
	if !reflect.DeepEqual(conds, svc.Status.Conditions) {
		status["conditions"] = conds
	}
	if Classify(svc, ClaimOf(m.d.Settings)) == LoadBalancer {
		lb, err := LoadBalancerIngress(svc, dev)
		if err != nil {
			return runtime.Permanent(err)
		}
		if !SameLoadBalancer(lb, svc.Status.LoadBalancer.Ingress) {
			status["loadBalancer"] = map[string]any{"ingress": lb}
		}
	}
	if len(status) == 0 {
		return nil
	}
	return m.d.PatchStatus(ctx, resources.Services, svc.Namespace, svc.Name, status)
}
