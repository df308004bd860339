package proxygroup

import (
	"cmp"
	"context"
	"fmt"
	"reflect"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/tailplane/tailplane/crds/tailscale/v1alpha1"
	"github.com/tailplane/tailplane/handlers/lib/cluster"
	"github.com/tailplane/tailplane/handlers/lib/conditions"
	"github.com/tailplane/tailplane/handlers/lib/groupmember"
	"github.com/tailplane/tailplane/handlers/lib/pipeline"
	"github.com/tailplane/tailplane/handlers/lib/proxyclassrules"
	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/handlers/lib/resources"
	"github.com/tailplane/tailplane/handlers/lib/staticendpoints"
	"github.com/tailplane/tailplane/internal/tailnet"
	"github.com/tailplane/tailplane/proxy/config"
	"github.com/tailplane/tailplane/runtime"
)

type groups struct {
	d *cluster.Deps
	p *pipeline.Pipeline
	// members are the kinds of members, registered by their own modules.
	members *groupmember.Registry
	// static are the groups' static endpoints.
	static *staticendpoints.Groups
}

// Register adds ProxyGroups to the pipeline: a group's replicas host what
// its members (the kinds in members, which their modules register) ask
// for; a change of a group re-handles its members.
func Register(op *runtime.Operator, d *cluster.Deps, p *pipeline.Pipeline, members *groupmember.Registry) {
	g := &groups{d: d, p: p, members: members, static: staticendpoints.Register(op, d)}
	registerEgress(op, g)
	p.Register(op, pipeline.Module{
		ID: "proxygroup", Resource: resources.ProxyGroups, Kind: "ProxyGroup",
		ParentType: groupmember.ParentType, Role: cluster.RoleProxyGroup, ProxyKind: proxyclassrules.L7, ClusterScoped: true,
		IsOurs:  func(*unstructured.Unstructured) bool { return true },
		Tailnet: pipeline.SpecTailnet,
		Plan:    g.plan,
		Report:  g.report,
		Release: func(context.Context, *unstructured.Unstructured, []proxyset.Device) error { return nil },
	})
	registerAPIServer(op, g)
	op.OnEvent(resources.ProxyGroups, "proxygroup-metrics-gone", func(_ context.Context, typ watch.EventType, obj *unstructured.Unstructured) error {
		if typ == watch.Deleted {
			d.Metrics.ForgetProxyGroup(obj.GetName())
		}
		return nil
	})
}

// plan is the group's replicas, each hosting every member's service (or
// egress target, or the API server), reachable at their static endpoints.
func (g *groups) plan(ctx context.Context, obj *unstructured.Unstructured) (*pipeline.Plan, error) {
	pg, err := groupmember.Decode(obj)
	if err != nil {
		return nil, err
	}
	plan, err := g.planOfType(ctx, pg)
	if err != nil || plan == nil || plan.Invalid != "" {
		return plan, err
	}
	if plan.Failed, err = g.static.Plan(ctx, pg, plan); err != nil {
		return nil, err
	}
	return plan, nil
}

// planOfType is the plan of the group's type.
func (g *groups) planOfType(ctx context.Context, pg *v1alpha1.ProxyGroup) (*pipeline.Plan, error) {
	if err := validate(pg, g.d.Settings.ProxyTags); err != nil {
		return &pipeline.Plan{Invalid: err.Error()}, nil
	}
	if msg := g.unsupported(pg); msg != "" {
		return &pipeline.Plan{Invalid: msg}, nil
	}
	tags, _ := groupTags(pg, g.d.Settings.ProxyTags)
	plan := &pipeline.Plan{Hostnames: hostnames(pg), Tags: tags, ProxyClass: proxyClassName(pg, g.d.Settings.DefaultProxyClass)}
	if pg.Spec.Type == v1alpha1.ProxyGroupTypeKubeAPIServer {
		return g.planAPIServer(ctx, pg, plan)
	}
	if pg.Spec.Type == v1alpha1.ProxyGroupTypeEgress {
		targets, err := g.egressTargets(ctx, pg.Name)
		if err != nil {
			return nil, err
		}
		plan.Config = func(i int) (*config.Config, error) {
			return egressConfig(pg, targets, tags, i), nil
		}
		return plan, nil
	}
	hosted, err := g.members.Services(ctx, pg.Name)
	if err != nil {
		return nil, err
	}
	hosted = oldestByName(hosted)
	services := make([]config.Service, 0, len(hosted))
	var secrets []string
	for _, h := range hosted {
		services = append(services, h.Service)
		secrets = append(secrets, h.Secrets...)
	}
	slices.Sort(secrets)
	plan.ExtraSecrets = slices.Compact(secrets)
	plan.Config = func(i int) (*config.Config, error) {
		return ingressConfig(pg, services, tags, i), nil
	}
	return plan, nil
}

// oldestByName keeps, of the members that want one Tailscale Service, the
// oldest one (the first of equals), sorted by service name.
func oldestByName(hosted []groupmember.Hosted) []groupmember.Hosted {
	byName := map[string]int{}
	var out []groupmember.Hosted
	for _, h := range hosted {
		i, taken := byName[h.Service.Name]
		switch {
		case !taken:
			byName[h.Service.Name] = len(out)
			out = append(out, h)
		case h.Created.Before(&out[i].Created):
			out[i] = h
		}
	}
	slices.SortFunc(out, func(a, b groupmember.Hosted) int { return cmp.Compare(a.Service.Name, b.Service.Name) })
	return out
}

// report writes the group's status, posts the official Warning Events, and
// has the members look at the group again (their status follows its
// replicas' advertisements).
func (g *groups) report(ctx context.Context, obj *unstructured.Unstructured, out pipeline.Outcome) error {
	pg, err := groupmember.Decode(obj)
	if err != nil {
		return err
	}
	for _, k := range g.members.Keys(pg.Name) {
		g.d.Op.Enqueue(k.Resource, k.Namespace+"/"+k.Name, 0)
	}
	replicas, err := groupmember.ReplicaPods(ctx, g.d, g.p, pg)
	if err != nil {
		return err
	}
	out.Serving = runningDevices(replicas, out.Serving)
	g.d.Metrics.ObserveProxyGroup(observed(pg, replicas, out.Serving))
	st := groupStatus(pg, out)
	// Posted with a new ProxyGroupReady only (not again at each restart).
	if ready := meta.FindStatusCondition(st.Conditions, v1alpha1.ProxyGroupReady); ready != nil && conditions.Changed(pg.Status.Conditions, *ready) {
		switch out.Stage {
		case pipeline.Invalid:
			g.d.Post(pg, corev1.EventTypeWarning, ReasonInvalid, out.Message)
		case pipeline.Failed:
			g.d.Post(pg, corev1.EventTypeWarning, ready.Reason, out.Message)
		}
	}
	g.static.SetStatus(pg.Name, st.Devices)
	if pg.Spec.Type == v1alpha1.ProxyGroupTypeKubeAPIServer {
		apiServerStatus(pg, out, &st)
	}
	if reflect.DeepEqual(st, pg.Status) {
		return nil
	}
	return g.d.PatchStatus(ctx, resources.ProxyGroups, "", pg.Name, map[string]any{
		"conditions": st.Conditions, "devices": cluster.OrNil(len(st.Devices) == 0, st.Devices), "url": cluster.OrNil(st.URL == "", st.URL)})
}

// unsupported says why pg cannot run on its tailnet's control server: the
// ingress and kube-apiserver types host Tailscale Services, which Headscale
// lacks (egress groups need none). "" when it can, or when the tailnet is
// not usable yet (the pipeline reports that itself).
func (g *groups) unsupported(pg *v1alpha1.ProxyGroup) string {
	if pg.Spec.Type == v1alpha1.ProxyGroupTypeEgress {
		return ""
	}
	be, err := g.d.Tailnets.For(pg.Spec.Tailnet)
	if err != nil {
		return ""
	}
	return tailnet.Unsupported(be, fmt.Sprintf("a ProxyGroup of type %s (high availability through Tailscale Services)", pg.Spec.Type), tailnet.FeatureServices)
}
