package proxygroup

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/tailplane/tailplane/crds/tailscale/v1alpha1"
	"github.com/tailplane/tailplane/handlers/lib/cluster"
	"github.com/tailplane/tailplane/handlers/lib/pipeline"
	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/handlers/lib/resources"
	"github.com/tailplane/tailplane/handlers/lib/tsservice"
	"github.com/tailplane/tailplane/internal/tailnet"
	"github.com/tailplane/tailplane/runtime"
)

// memberKind is what differs between Ingress and Service members, whose
// lifecycle (pipeline.MemberModule) is otherwise one: each is a Tailscale
// Service that every replica of its group hosts.
type memberKind struct {
	kind      string
	resource  schema.GroupVersionResource
	finalizer string
	index     string
	isMember  func(*unstructured.Unstructured) bool
	// render returns the member, or why it cannot be served.
	render func(ctx context.Context, obj *unstructured.Unstructured) (*member, error)
	// status writes the member's status: advertising of total replicas
	// host its service (domain and addrs known once one does); m nil
	// clears it.
	status func(ctx context.Context, obj *unstructured.Unstructured, m *member, st memberStatus) error
	// invalid shows why the member cannot be served.
	invalid func(ctx context.Context, obj *unstructured.Unstructured, reason, msg string) error
}

// memberStatus is what a member's status is written from.
type memberStatus struct {
	Advertising, Total int
	// DNSName is <hostname>.<tailnet domain> ("" until a replica has a name).
	DNSName string
	Addrs   []string
}

// admitted is a member that may be served, with its group.
type admitted struct {
	m  *member
	pg *v1alpha1.ProxyGroup
	be tailnet.Backend
}

// memberModule is k as a pipeline member.
func (g *groups) memberModule(k *memberKind) pipeline.MemberModule[admitted] {
	return pipeline.MemberModule[admitted]{
		ID: "proxygroup-" + strings.ToLower(k.kind), Resource: k.resource, Kind: k.kind, Finalizer: k.finalizer,
		Index: k.index, GroupResource: resources.ProxyGroups, IsOurs: k.isMember, Group: groupOf,
		Admit: func(ctx context.Context, obj *unstructured.Unstructured) (admitted, bool, error) {
			return g.admit(ctx, k, obj)
		},
		Serve: func(ctx context.Context, obj *unstructured.Unstructured, a admitted) error {
			return g.serve(ctx, k, obj, a)
		},
		Release: func(ctx context.Context, obj *unstructured.Unstructured) error {
			o := ownerOf(k.kind, obj)
			if err := g.sweepAll(ctx, o); err != nil {
				return err
			}
			return tsservice.DeleteCertSecrets(ctx, g.d.Kube, g.d.Settings.Namespace, o)
		},
		Clear: func(ctx context.Context, obj *unstructured.Unstructured) error {
			return k.status(ctx, obj, nil, memberStatus{})
		},
	}
}

// groupOf is the ProxyGroup an object names.
func groupOf(obj *unstructured.Unstructured) string {
	return obj.GetAnnotations()[AnnotationProxyGroup]
}

// admit renders obj and checks that its group exists, is of type ingress
// and that the group's tailnet offers Tailscale Services.
func (g *groups) admit(ctx context.Context, k *memberKind, obj *unstructured.Unstructured) (admitted, bool, error) {
	m, err := k.render(ctx, obj)
	if err != nil {
		return admitted{}, false, k.invalid(ctx, obj, ReasonIngressSvcInvalid, err.Error())
	}
	pg, err := g.group(ctx, m.Group)
	if err != nil {
		return admitted{}, false, err
	}
	switch {
	case pg == nil:
		return admitted{}, false, k.invalid(ctx, obj, ReasonProxyGroupNotFound, fmt.Sprintf("ProxyGroup %q does not exist", m.Group))
	case pg.Spec.Type != v1alpha1.ProxyGroupTypeIngress:
		return admitted{}, false, k.invalid(ctx, obj, ReasonIngressSvcInvalid, fmt.Sprintf("ProxyGroup %q is of type %q; %ss need a ProxyGroup of type ingress", m.Group, pg.Spec.Type, m.Kind))
	}
	be, err := g.backend(pg)
	if err != nil {
		return admitted{}, false, err
	}
	if msg := tailnet.Unsupported(be, fmt.Sprintf("this %s, served by ProxyGroup %q,", m.Kind, m.Group), tailnet.FeatureServices); msg != "" {
		return admitted{}, false, k.invalid(ctx, obj, ReasonIngressSvcInvalid, msg)
	}
	return admitted{m: m, pg: pg, be: be}, true, nil
}

// serve makes obj's Tailscale Service exist, owned by obj, and writes obj's
// status from its group's replicas; the group's own handler puts the
// service into the replicas' configs.
func (g *groups) serve(ctx context.Context, k *memberKind, obj *unstructured.Unstructured, a admitted) error {
	m, be := a.m, a.be
	existing, err := be.GetService(ctx, m.serviceName())
	if err != nil {
		return err
	}
	want, err := m.desired(existing, g.d.OperatorNodeID)
	if err != nil {
		return k.invalid(ctx, obj, ReasonInvalidTailscaleSvc, err.Error())
	}
	if existing == nil || !tsservice.Same(*existing, want) {
		if err := be.PutService(ctx, want); err != nil {
			return err
		}
		if existing, err = be.GetService(ctx, m.serviceName()); err != nil {
			return err
		}
	}
	if err := tsservice.Sweep(ctx, be, g.d.OperatorNodeID, m.owner(), m.serviceName()); err != nil {
		return err
	}
	g.warnIfShadowed(ctx, be, obj, m.Hostname)
	if m.Service.L7 != nil {
		if err := tsservice.EnsureCertSecret(ctx, g.d.Kube, g.d.Settings.Namespace, m.Service.L7.TLS.SecretName, m.owner()); err != nil {
			return err
		}
	}
	st, err := g.memberStatus(ctx, a.pg, m.serviceName())
	if err != nil {
		return err
	}
	if existing != nil {
		st.Addrs = existing.Addrs
	}
	return k.status(ctx, obj, m, st)
}

// group reads a ProxyGroup; nil when it does not exist.
func (g *groups) group(ctx context.Context, name string) (*v1alpha1.ProxyGroup, error) {
	u, err := g.d.Dyn.Resource(resources.ProxyGroups).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read ProxyGroup %s: %w", name, err)
	}
	return decode(u)
}

// memberStatus counts the group's replicas that advertise service; none
// while the group is not available.
func (g *groups) memberStatus(ctx context.Context, pg *v1alpha1.ProxyGroup, service string) (memberStatus, error) {
	st := memberStatus{Total: replicaCount(pg)}
	proxy, err := g.p.ReadProxy(ctx, proxyset.Parent{Type: ParentType, Name: pg.Name, UID: pg.UID, Role: cluster.RoleProxyGroup}, st.Total)
	if err != nil {
		return st, err
	}
	for _, r := range proxy.Replicas {
		if _, domain, ok := strings.Cut(r.Device.FQDN, "."); ok && st.DNSName == "" {
			st.DNSName = strings.TrimPrefix(service, "svc:") + "." + domain
		}
		if r.Device.Advertises(service) {
			st.Advertising++
		}
	}
	if !available(pg) {
		st.Advertising = 0
	}
	return st, nil
}

// backend is the tailnet backend of group pg (spec.tailnet); a Tailnet
// that cannot be used is retried (its handler has the group, and so its
// members, handled again once it is ready).
func (g *groups) backend(pg *v1alpha1.ProxyGroup) (tailnet.Backend, error) {
	be, err := g.d.Tailnets.For(pg.Spec.Tailnet)
	if err != nil {
		return nil, runtime.Temporary(fmt.Errorf("ProxyGroup %s: %w", pg.Name, err), pipeline.TailnetRetry)
	}
	return be, nil
}

// sweepAll sweeps o's Tailscale Services out of every tailnet the
// operator can reach: o may have left a group of another tailnet.
func (g *groups) sweepAll(ctx context.Context, o tsservice.Owner) error {
	for _, be := range g.d.Tailnets.All() {
		if err := tsservice.Sweep(ctx, be, g.d.OperatorNodeID, o, ""); err != nil {
			return err
		}
	}
	return nil
}

// ownerOf is obj, of kind, as the owner of Tailscale Services.
func ownerOf(kind string, obj *unstructured.Unstructured) tsservice.Owner {
	return tsservice.Owner{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: obj.GetUID()}
}

// warnIfShadowed posts a Warning when a device has the MagicDNS name the
// member's Tailscale Service wants (a dedicated proxy of another object
// named like it, the seed's Ingress and ProxyGroup Service both "my-app"):
// clients then resolve the name to the device. It does not refuse the
// member: the device may be this object's own dedicated proxy, on its way
// out as the object moves into the group. A failed device list only skips
// the check.
func (g *groups) warnIfShadowed(ctx context.Context, be tailnet.Backend, obj *unstructured.Unstructured, hostname string) {
	devices, err := be.ListDevices(ctx)
	if err != nil {
		g.d.Log.Warn("cannot list devices to check the Tailscale Service's name", "hostname", hostname, "err", err)
		return
	}
	if name := tsservice.ShadowingDevice(devices, hostname); name != "" {
		g.d.Post(obj, corev1.EventTypeWarning, ReasonNameShadowed, fmt.Sprintf(
			"device %s has the MagicDNS name of Tailscale Service svc:%s: clients resolve %s to the device, not to the service; give one of them another hostname",
			name, hostname, name))
	}
}
