package service

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/tailplane/tailplane/handlers/kit"
	"github.com/tailplane/tailplane/handlers/pipeline"
	"github.com/tailplane/tailplane/handlers/proxyclass"
	"github.com/tailplane/tailplane/handlers/proxyset"
	"github.com/tailplane/tailplane/proxy/config"
	"github.com/tailplane/tailplane/runtime"
)

// Role is the role of the L4 proxies of exposed Services.
const Role = kit.RoleIngressL4

// ReasonInvalidService is the official Warning Event reason for refused
// Services.
const ReasonInvalidService = "INVALIDSERVICE"

type module struct{ d *kit.Deps }

// Register adds the exposed-Service module to the pipeline: create, update
// and resume apply the proxy; delete (and a Service that stopped asking for
// a proxy) removes the device, the proxy's objects, then the finalizer.
// Services that never asked for a proxy match no handler and are never
// touched.
func Register(op *runtime.Operator, d *kit.Deps, p *pipeline.Pipeline) {
	m := &module{d: d}
	p.Register(op, pipeline.Module{
		ID: "service", Resource: kit.Services, Kind: "Service",
		ParentType: proxyset.ParentService, Role: Role, ProxyKind: proxyclass.L4,
		IsOurs: m.isOurs, Plan: m.plan, Report: m.report, Release: m.release,
	})
}

func decode(obj *unstructured.Unstructured) (*corev1.Service, error) {
	var svc corev1.Service
	if err := kit.FromUnstructured(obj, &svc); err != nil {
		return nil, runtime.Permanent(err)
	}
	svc.APIVersion, svc.Kind = "v1", "Service"
	return &svc, nil
}

func (m *module) isOurs(obj *unstructured.Unstructured) bool {
	svc, err := decode(obj)
	return err == nil && Classify(svc, m.d.Settings.DefaultLoadBalancer) != NotOurs
}

// plan is one L4 replica forwarding every port to the ClusterIP (or the
// externalName, which must resolve before the Service is Ready).
func (m *module) plan(_ context.Context, obj *unstructured.Unstructured) (*pipeline.Plan, error) {
	svc, err := decode(obj)
	if err != nil {
		return nil, err
	}
	s := m.d.Settings
	if problems := Validate(svc, s); len(problems) > 0 {
		return &pipeline.Plan{Invalid: strings.Join(problems, " ")}, nil
	}
	hostname, _ := Hostname(svc)
	tags, _ := proxyset.Tags(svc.Annotations, s.ProxyTags)
	plan := &pipeline.Plan{
		Hostnames: []string{hostname}, Tags: tags, ProxyClass: ProxyClassName(svc, s),
		Config: func(_ int, key string) (*config.Config, error) {
			return Config(svc, s, m.d.Backend.LoginServer(), key)
		},
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
	svc, err := decode(obj)
	if err != nil {
		return err
	}
	reason, msg := ReasonProxyCreated, ReasonProxyCreated
	var dev proxyset.Device
	switch out.Stage {
	case pipeline.Invalid:
		reason, msg = ReasonProxyInvalid, "unable to provision proxy resources: invalid Service: "+out.Message
		m.d.Post(svc, corev1.EventTypeWarning, ReasonInvalidService, msg)
	case pipeline.Waiting, pipeline.Pending:
		reason, msg = ReasonProxyPending, out.Message
	case pipeline.Failed:
		reason, msg = ReasonProxyFailed, out.Message
		if out.Cause == pipeline.CauseAuthKey {
			m.d.Post(svc, corev1.EventTypeWarning, ReasonProxyFailed, out.Message)
		}
		if out.Cause == pipeline.CauseConfigError && len(out.Serving) > 0 {
			dev = out.Serving[0] // the previous config keeps serving
		}
	case pipeline.Ready:
		dev = out.Serving[0]
	}
	return m.setStatus(ctx, svc, reason, msg, dev)
}

// release removes the condition and the LoadBalancer addresses of a Service
// that no longer asks for a proxy (annotation removed, class switched away).
func (m *module) release(ctx context.Context, obj *unstructured.Unstructured, devices []proxyset.Device) error {
	svc, err := decode(obj)
	if err != nil {
		return err
	}
	status := map[string]any{}
	if c := kit.RemoveCondition(svc.Status.Conditions, ConditionProxyReady); len(c) != len(svc.Status.Conditions) {
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
	return m.d.PatchStatus(ctx, kit.Services, svc.Namespace, svc.Name, status)
}

// setStatus writes TailscaleProxyReady and, for a tailscale LoadBalancer,
// status.loadBalancer.ingress (the FQDN, then the tailnet IPs), when they
// changed.
func (m *module) setStatus(ctx context.Context, svc *corev1.Service, reason, message string, dev proxyset.Device) error {
	cond := metav1.Condition{Type: ConditionProxyReady, Status: metav1.ConditionFalse, Reason: reason, Message: message}
	if reason == ReasonProxyCreated {
		cond.Status = metav1.ConditionTrue
	}
	conds := kit.SetCondition(svc.Status.Conditions, cond)
	status := map[string]any{}
	if !reflect.DeepEqual(conds, svc.Status.Conditions) {
		status["conditions"] = conds
	}
	if Classify(svc, m.d.Settings.DefaultLoadBalancer) == LoadBalancer {
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
