package groupmember

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tailplane/tailplane/crds/tailscale/v1alpha1"
	"github.com/tailplane/tailplane/handlers/lib/cluster"
	"github.com/tailplane/tailplane/handlers/lib/pipeline"
	"github.com/tailplane/tailplane/handlers/lib/resources"
	"github.com/tailplane/tailplane/handlers/lib/tsservice"
	"github.com/tailplane/tailplane/internal/tailnet"
	"github.com/tailplane/tailplane/proxy/config"
	"github.com/tailplane/tailplane/runtime"
)

// Reasons and messages of members hosted as Tailscale Services, the
// official ones unless said otherwise.
const (
	// ReasonIngressSvcInvalid says the member cannot be served.
	ReasonIngressSvcInvalid = "IngressSvcInvalid"
	// ReasonInvalidTailscaleSvc says the Tailscale Service the member wants
	// belongs to another object or operator.
	ReasonInvalidTailscaleSvc = "InvalidTailscaleService"
	// ReasonNameShadowed (Tailplane's) warns that a device has the MagicDNS
	// name a member's Tailscale Service wants.
	ReasonNameShadowed = "HostnameInUseByDevice"
	// ReasonShared (Tailplane's) says that operators of other clusters
	// serve the member's Tailscale Service too.
	ReasonShared = "TailscaleServiceShared"
	// MessageBackendsAdvertising counts the replicas advertising a
	// Tailscale Service, of all replicas.
	MessageBackendsAdvertising = "%d/%d proxy backends ready and advertising"
)

// ServiceMember is an object served by an ingress group as the Tailscale
// Service svc:<Hostname> (or, for its own service, a kube-apiserver group).
type ServiceMember struct {
	Kind, Namespace, Name string
	UID                   types.UID
	// Group is the ProxyGroup's name.
	Group string
	// Hostname is the Tailscale Service's DNS label.
	Hostname string
	// Tags are the Tailscale Service's tags.
	Tags []string
	// Ports are the ports the service serves, in the API's "tcp:443" form.
	Ports []string
	// Service is what the group's replicas host.
	Service config.Service
}

// ServiceName is the Tailscale Service's name, "svc:<hostname>".
func (m *ServiceMember) ServiceName() string { return tsservice.Name(m.Hostname) }

// Owner is m as the owner of its Tailscale Service.
func (m *ServiceMember) Owner() tsservice.Owner {
	return tsservice.Owner{Kind: m.Kind, Namespace: m.Namespace, Name: m.Name, UID: m.UID}
}

// Desired is the Tailscale Service m wants, given the one that exists.
func (m *ServiceMember) Desired(existing *tailnet.Service, operatorID string) (tsservice.Claim, error) {
	return tsservice.Desired(m.Owner(), m.Hostname, m.Tags, m.Ports, existing, operatorID)
}

// Status is what a member's status is written from.
type Status struct {
	// Advertising of Total replicas host the member's service (none while
	// the group is not available).
	Advertising, Total int
	// DNSName is <hostname>.<tailnet domain> ("" until a replica has a name).
	DNSName string
	// Addrs are the Tailscale Service's addresses.
	Addrs []string
	// SharedWith are the other operators (other clusters) that serve the
	// Tailscale Service too, as SharedWith names them.
	SharedWith []string
}

// ServiceKind is what differs between the kinds of members hosted as a
// Tailscale Service, whose lifecycle is otherwise one (RegisterServiceKind).
type ServiceKind struct {
	// Kind names the member's kind (its handlers are
	// "proxygroup-<kind>-sync" and "-cleanup").
	Kind      string
	Resource  schema.GroupVersionResource
	Finalizer string
	// Index is the index of members by group.
	Index    string
	IsMember runtime.Predicate
	// Group names a member's ProxyGroup; nil is GroupOf (the
	// tailscale.com/proxy-group annotation).
	Group func(obj *unstructured.Unstructured) string
	// Render returns the member, or why it cannot be served; it posts
	// what is served despite problems.
	Render func(ctx context.Context, obj *unstructured.Unstructured) (*ServiceMember, error)
	// Host reads the member with key and renders it for its group's
	// replicas; nil when it is gone or cannot be served.
	Host func(ctx context.Context, key runtime.Key, group string) (*Hosted, error)
	// Status writes the member's status; m nil clears it.
	Status func(ctx context.Context, obj *unstructured.Unstructured, m *ServiceMember, st Status) error
	// Invalid shows why the member cannot be served.
	Invalid func(ctx context.Context, obj *unstructured.Unstructured, reason, msg string) error
}

// serviceKind is a registered ServiceKind: its members and their pieces.
type serviceKind struct {
	ServiceKind
	d       *cluster.Deps
	p       *pipeline.Pipeline
	members *pipeline.Members
	owners  ownersSeen
}

// admitted is a member that may be served, with its group.
type admitted struct {
	m  *ServiceMember
	pg *v1alpha1.ProxyGroup
	be tailnet.Backend
}

// RegisterServiceKind adds k's members to the pipeline with the member
// lifecycle of pipeline.RegisterMember, and k to reg, from which their
// ingress group reads their services.
func RegisterServiceKind(op *runtime.Operator, d *cluster.Deps, p *pipeline.Pipeline, reg *Registry, k ServiceKind) {
	if k.Group == nil {
		k.Group = GroupOf
	}
	sk := &serviceKind{ServiceKind: k, d: d, p: p}
	sk.members = pipeline.RegisterMember(p, op, pipeline.MemberModule[admitted]{
		ID: "proxygroup-" + strings.ToLower(k.Kind), Resource: k.Resource, Kind: k.Kind, Finalizer: k.Finalizer,
		Index: k.Index, GroupResource: resources.ProxyGroups, IsOurs: k.IsMember, Group: k.Group,
		Admit: sk.admit, Serve: sk.serve,
		Release: func(ctx context.Context, obj *unstructured.Unstructured) error {
			o := OwnerOf(k.Kind, obj)
			if err := SweepAll(ctx, d, o); err != nil {
				return err
			}
			return tsservice.DeleteCertSecrets(ctx, d.Kube, d.Settings.Namespace, o)
		},
		Clear: func(ctx context.Context, obj *unstructured.Unstructured) error {
			return k.Status(ctx, obj, nil, Status{})
		},
	})
	reg.Add(sk)
	_ = op.Every("proxygroup-"+strings.ToLower(k.Kind)+"-owners", d.SharedServiceCheck, sk.checkOwners) // collected by Run
}

// Keys are the group's members of this kind.
func (k *serviceKind) Keys(group string) []runtime.Key { return k.members.Keys(group) }

// Services renders the group's members of this kind.
func (k *serviceKind) Services(ctx context.Context, group string) ([]Hosted, error) {
	var out []Hosted
	for _, key := range k.members.Keys(group) {
		h, err := k.Host(ctx, key, group)
		if err != nil {
			return nil, err
		}
		if h != nil {
			out = append(out, *h)
		}
	}
	return out, nil
}

// admit renders obj and checks that its group exists, is of type ingress
// and that the group's tailnet offers Tailscale Services.
func (k *serviceKind) admit(ctx context.Context, obj *unstructured.Unstructured) (admitted, bool, error) {
	m, err := k.Render(ctx, obj)
	if err != nil {
		return admitted{}, false, k.Invalid(ctx, obj, ReasonIngressSvcInvalid, err.Error())
	}
	pg, err := Read(ctx, k.d, m.Group)
	if err != nil {
		return admitted{}, false, err
	}
	switch {
	case pg == nil:
		return admitted{}, false, k.Invalid(ctx, obj, ReasonProxyGroupNotFound, fmt.Sprintf("ProxyGroup %q does not exist", m.Group))
	case pg.Spec.Type != v1alpha1.ProxyGroupTypeIngress:
		return admitted{}, false, k.Invalid(ctx, obj, ReasonIngressSvcInvalid, fmt.Sprintf("ProxyGroup %q is of type %q; %ss need a ProxyGroup of type ingress", m.Group, pg.Spec.Type, m.Kind))
	}
	be, err := Backend(k.d, pg)
	if err != nil {
		return admitted{}, false, err
	}
	if msg := tailnet.Unsupported(be, fmt.Sprintf("this %s, served by ProxyGroup %q,", m.Kind, m.Group), tailnet.FeatureServices); msg != "" {
		return admitted{}, false, k.Invalid(ctx, obj, ReasonIngressSvcInvalid, msg)
	}
	return admitted{m: m, pg: pg, be: be}, true, nil
}

// serve makes obj's Tailscale Service exist, owned by obj, and writes obj's
// status from its group's replicas; the group's own handler puts the
// service into the replicas' configs.
func (k *serviceKind) serve(ctx context.Context, obj *unstructured.Unstructured, a admitted) error {
	m, be := a.m, a.be
	existing, err := be.GetService(ctx, m.ServiceName())
	if err != nil {
		return err
	}
	claim, err := m.Desired(existing, k.d.OperatorNodeID)
	if err != nil {
		return k.Invalid(ctx, obj, ReasonInvalidTailscaleSvc, err.Error())
	}
	if want := claim.Service; existing == nil || !tsservice.Same(*existing, want) {
		if err := be.PutService(ctx, want); err != nil {
			return err
		}
		if existing, err = be.GetService(ctx, m.ServiceName()); err != nil {
			return err
		}
	}
	if err := tsservice.Sweep(ctx, be, k.d.OperatorNodeID, m.Owner(), m.ServiceName()); err != nil {
		return err
	}
	devices := k.devices(ctx, be, m.Hostname)
	k.warnIfShadowed(obj, devices, m.Hostname)
	shared := SharedWith(claim.Others, devices)
	if len(shared) > 0 {
		k.d.Post(obj, corev1.EventTypeNormal, ReasonShared, SharedMessage(m.ServiceName(), m.Kind, shared))
	}
	for _, name := range m.Service.SharedCertificates() {
		if err := tsservice.EnsureCertSecret(ctx, k.d.Kube, k.d.Settings.Namespace, name, m.Owner()); err != nil {
			return err
		}
	}
	st, err := k.advertising(ctx, a.pg, m.ServiceName())
	if err != nil {
		return err
	}
	if existing != nil {
		st.Addrs = existing.Addrs
	}
	st.SharedWith = shared
	return k.Status(ctx, obj, m, st)
}

// advertising counts the group's replicas that advertise service; none
// while the group is not available.
func (k *serviceKind) advertising(ctx context.Context, pg *v1alpha1.ProxyGroup, service string) (Status, error) {
	st := Status{Total: Replicas(pg)}
	proxy, err := k.p.ReadProxy(ctx, parent(pg), st.Total)
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

// devices lists be's devices for the checks on a member's name; a failed
// list only skips them (nil).
func (k *serviceKind) devices(ctx context.Context, be tailnet.Backend, hostname string) []tailnet.Device {
	devices, err := be.ListDevices(ctx)
	if err != nil {
		k.d.Log.Warn("cannot list devices to check the Tailscale Service's name and owners", "hostname", hostname, "err", err)
		return nil
	}
	return devices
}

// warnIfShadowed posts a Warning when a device has the MagicDNS name the
// member's Tailscale Service wants (a dedicated proxy of another object
// named like it, the seed's Ingress and ProxyGroup Service both "my-app"):
// clients then resolve the name to the device. It does not refuse the
// member: the device may be this object's own dedicated proxy, on its way
// out as the object moves into the group.
func (k *serviceKind) warnIfShadowed(obj *unstructured.Unstructured, devices []tailnet.Device, hostname string) {
	if name := tsservice.ShadowingDevice(devices, hostname); name != "" {
		k.d.Post(obj, corev1.EventTypeWarning, ReasonNameShadowed, fmt.Sprintf(
			"device %s has the MagicDNS name of Tailscale Service svc:%s: clients resolve %s to the device, not to the service; give one of them another hostname",
			name, hostname, name))
	}
}
