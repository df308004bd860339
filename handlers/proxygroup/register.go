package proxygroup

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/tailplane/tailplane/crds/tailscale/v1alpha1"
	"github.com/tailplane/tailplane/handlers/ingress"
	"github.com/tailplane/tailplane/handlers/lib/cluster"
	"github.com/tailplane/tailplane/handlers/lib/conditions"
	"github.com/tailplane/tailplane/handlers/lib/pipeline"
	"github.com/tailplane/tailplane/handlers/lib/proxyclassrules"
	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/handlers/lib/resources"
	"github.com/tailplane/tailplane/handlers/plugin"
	"github.com/tailplane/tailplane/handlers/service"
	"github.com/tailplane/tailplane/internal/tailnet"
	"github.com/tailplane/tailplane/proxy/config"
	"github.com/tailplane/tailplane/runtime"
)

// Indexes of members by ProxyGroup name (values "namespace/name").
const (
	indexIngressMembers = "proxygroup-ingresses"
	indexServiceMembers = "proxygroup-services"
	indexEgressMembers  = "proxygroup-egress"
)

type groups struct {
	d *cluster.Deps
	p *pipeline.Pipeline
	// The group's members, by kind.
	ingresses, services, egresses *pipeline.Members
}

// Register adds ProxyGroups to the pipeline and their members' handlers:
// a group's replicas host every valid member's Tailscale Service; a change
// of a member re-renders its group (and the group it left); a change of a
// group re-handles its members.
func Register(op *runtime.Operator, d *cluster.Deps, p *pipeline.Pipeline) {
	g := &groups{d: d, p: p}
	registerEgress(op, g)
	p.Register(op, pipeline.Module{
		ID: "proxygroup", Resource: resources.ProxyGroups, Kind: "ProxyGroup",
		ParentType: ParentType, Role: cluster.RoleProxyGroup, ProxyKind: proxyclassrules.L7, ClusterScoped: true,
		IsOurs:  func(*unstructured.Unstructured) bool { return true },
		Tailnet: pipeline.SpecTailnet,
		Plan:    g.plan,
		Report:  g.report,
		Release: func(context.Context, *unstructured.Unstructured, []proxyset.Device) error { return nil },
	})
	g.ingresses = pipeline.RegisterMember(p, op, g.memberModule(g.ingressKind()))
	g.services = pipeline.RegisterMember(p, op, g.memberModule(g.serviceKind()))
	g.egresses = pipeline.RegisterMember(p, op, g.egressModule())
	registerAPIServer(op, g)
}

func decode(obj *unstructured.Unstructured) (*v1alpha1.ProxyGroup, error) {
	var pg v1alpha1.ProxyGroup
	if err := cluster.FromUnstructured(obj, &pg); err != nil {
		return nil, runtime.Permanent(err)
	}
	pg.APIVersion, pg.Kind = v1alpha1.GroupVersion.String(), "ProxyGroup"
	return &pg, nil
}

// plan is the group's replicas, each hosting every member's service.
func (g *groups) plan(ctx context.Context, obj *unstructured.Unstructured) (*pipeline.Plan, error) {
	pg, err := decode(obj)
	if err != nil {
		return nil, err
	}
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
			return egressConfig(pg, targets, tags, "", "", i), nil
		}
		return plan, nil
	}
	members, err := g.members(ctx, pg.Name)
	if err != nil {
		return nil, err
	}
	services := make([]config.Service, 0, len(members))
	var secrets []string
	for _, m := range members {
		services = append(services, m.Service)
		if m.Service.L7 != nil {
			secrets = append(secrets, m.Service.L7.TLS.SecretName)
		}
		secrets = append(secrets, m.PluginSecrets...)
	}
	slices.Sort(secrets)
	plan.ExtraSecrets = slices.Compact(secrets)
	plan.Config = func(i int) (*config.Config, error) {
		return ingressConfig(pg, services, tags, "", "", i), nil
	}
	return plan, nil
}

// members renders the group's valid members, sorted by service name; of
// two members wanting one Tailscale Service, the older one keeps it.
func (g *groups) members(ctx context.Context, group string) ([]*member, error) {
	var out []*member
	byName := map[string]*member{}
	created := map[string]metav1.Time{}
	add := func(m *member, ts metav1.Time) {
		if old, taken := created[m.serviceName()]; taken && !ts.Before(&old) {
			return
		}
		byName[m.serviceName()], created[m.serviceName()] = m, ts
	}
	for _, k := range g.ingresses.Keys(group) {
		ing, err := g.d.Kube.NetworkingV1().Ingresses(k.Namespace).Get(ctx, k.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read Ingress %s/%s of ProxyGroup %s: %w", k.Namespace, k.Name, group, err)
		}
		m, err := ingressMember(ing, g.d.Settings, ingress.Lookup(ctx, g.d.Kube, ing.Namespace))
		if err != nil {
			continue // its own handler says why
		}
		if m.Service.Plugins, m.PluginSecrets, err = plugin.Targeting(ctx, g.d, "Ingress", ing.Namespace, ing.Name, ing.Labels); err != nil {
			return nil, err
		}
		add(m, ing.CreationTimestamp)
	}
	for _, k := range g.services.Keys(group) {
		svc, err := g.d.Kube.CoreV1().Services(k.Namespace).Get(ctx, k.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read Service %s/%s of ProxyGroup %s: %w", k.Namespace, k.Name, group, err)
		}
		if m, err := serviceMember(svc, g.d.Settings); err == nil {
			add(m, svc.CreationTimestamp)
		}
	}
	for _, m := range byName {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].serviceName() < out[j].serviceName() })
	return out, nil
}

// report writes the group's status, posts the official Warning Events, and
// has the members look at the group again (their status follows its
// replicas' advertisements).
func (g *groups) report(ctx context.Context, obj *unstructured.Unstructured, out pipeline.Outcome) error {
	pg, err := decode(obj)
	if err != nil {
		return err
	}
	for _, k := range g.memberKeys(pg.Name) {
		g.d.Op.Enqueue(k.Resource, k.Namespace+"/"+k.Name, 0)
	}
	replicas, err := g.replicaPods(ctx, pg)
	if err != nil {
		return err
	}
	out.Serving = runningDevices(replicas, out.Serving)
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
	if pg.Spec.Type == v1alpha1.ProxyGroupTypeKubeAPIServer {
		apiServerStatus(pg, out, &st)
	}
	if reflect.DeepEqual(st, pg.Status) {
		return nil
	}
	return g.d.PatchStatus(ctx, resources.ProxyGroups, "", pg.Name, map[string]any{
		"conditions": st.Conditions, "devices": orNil(len(st.Devices) == 0, st.Devices), "url": orNil(st.URL == "", st.URL)})
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

// memberKeys are the group's members of every kind.
func (g *groups) memberKeys(group string) []runtime.Key {
	return slices.Concat(g.ingresses.Keys(group), g.services.Keys(group), g.egresses.Keys(group))
}

// isIngressMember: an Ingress of our class that names a ProxyGroup.
func (g *groups) isIngressMember(obj *unstructured.Unstructured) bool {
	if obj.GetAnnotations()[AnnotationProxyGroup] == "" {
		return false
	}
	class, _, _ := unstructured.NestedString(obj.Object, "spec", "ingressClassName")
	return class == g.d.Settings.IngressClassName
}

// isServiceMember: a tailscale LoadBalancer or exposed Service that names a
// ProxyGroup and no tailnet target (those are egress).
func (g *groups) isServiceMember(obj *unstructured.Unstructured) bool {
	a := obj.GetAnnotations()
	if a[AnnotationProxyGroup] == "" || a["tailscale.com/tailnet-fqdn"] != "" || a["tailscale.com/tailnet-ip"] != "" || a["tailscale.com/ts-tailnet-target-ip"] != "" {
		return false
	}
	if a["tailscale.com/expose"] == "true" {
		return true
	}
	svc, err := cluster.DecodeService(obj)
	return err == nil && service.IsTailscaleLoadBalancer(svc, service.ClaimOf(g.d.Settings))
}
