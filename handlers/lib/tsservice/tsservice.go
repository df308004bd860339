// Package tsservice keeps Tailscale Services (svc:<hostname>) that
// Kubernetes objects own: the owner annotation the official operator
// writes, the service an owner wants given the one that exists (shared with
// the same object of other clusters, as the official operator shares it;
// never taking another object's), sweeping an owner's services out of a tailnet, and the
// shared certificate Secret through which a group's replicas serve one
// service's TLS. ProxyGroup members and kube-apiserver groups own them
// today; Gateway routes next.
//
// tsservice.go and owners.go are pure; secrets.go and sweep.go talk to the API server and the
// tailnet. It may import handlers/lib/proxyset, internal/proxystate and
// internal/tailnet.
package tsservice

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/tailplane/tailplane/internal/tailnet"
)

const comment = "This Tailscale Service is managed by the Tailplane operator, do not modify"

// kindExclusive is the kind of owner that holds its Tailscale Service
// alone, named in its owner reference: a kube-apiserver ProxyGroup, as
// with the official operator. Every other owner (Ingress, Service,
// Gateway) shares its service with the same object in other clusters.
const kindExclusive = "ProxyGroup"

// Name is the Tailscale Service of a hostname, "svc:<hostname>".
func Name(hostname string) string { return "svc:" + hostname }

// Owner is the object a Tailscale Service belongs to.
type Owner struct {
	Kind, Namespace, Name string
	UID                   types.UID
}

func (o Owner) resource() OwnerResource {
	return OwnerResource{Kind: o.Kind, Name: o.Name, Namespace: o.Namespace, UID: o.UID}
}

func (o Owner) exclusive() bool { return o.Kind == kindExclusive }

// names reports whether r is o (by kind, namespace and name: an object
// deleted and made again takes its service back).
func (o Owner) names(r OwnerResource) bool {
	return r.Kind == o.Kind && r.Namespace == o.Namespace && r.Name == o.Name
}

// Claim is the Tailscale Service an owner wants.
type Claim struct {
	// Service is what to write.
	Service tailnet.Service
	// Others are the other operators (other clusters) that own the service
	// too, by the stable node ID of their device.
	Others []string
}

// Desired is the Tailscale Service hostname that o wants with tags and
// ports ("tcp:443"), given the one that exists (nil when none): addresses
// and other annotations are kept. As with the official operator, o shares
// a service that other operators own for their clusters' objects, and may
// not take one made by hand or held by a kube-apiserver ProxyGroup; nor,
// as Tailplane adds, one that another object of its own cluster owns. A
// kube-apiserver ProxyGroup takes only a service of its own.
func Desired(o Owner, hostname string, tags, ports []string, existing *tailnet.Service, operatorID string) (Claim, error) {
	want := tailnet.Service{Name: Name(hostname), Comment: comment, Tags: tags, Ports: ports, Annotations: map[string]string{}}
	own := owners{resources: map[string]OwnerResource{}}
	if existing != nil {
		var err error
		if own, err = readOwners(existing, operatorID); err != nil {
			return Claim{}, err
		}
		if err := refused(o, own, want.Name, operatorID); err != nil {
			return Claim{}, err
		}
		want.Addrs = existing.Addrs
		maps.Copy(want.Annotations, existing.Annotations)
	}
	claim := Claim{Others: own.others(operatorID)}
	switch {
	case o.exclusive():
		r := o.resource()
		own.refs = []OwnerRef{{OperatorID: operatorID, Resource: &r}}
	case !own.has(operatorID):
		own.refs = append(own.refs, OwnerRef{OperatorID: operatorID})
	}
	if !o.exclusive() {
		own.resources[operatorID] = o.resource()
	}
	if err := own.write(want.Annotations); err != nil {
		return Claim{}, err
	}
	claim.Service = want
	return claim, nil
}

// refused says why o may not own an existing service with owners own.
func refused(o Owner, own owners, name, operatorID string) error {
	if len(own.refs) == 0 {
		//lint:ignore ST1005 the official operator's condition message, capitalized as users see it
		return fmt.Errorf("Tailscale Service %s already exists and is not managed by a Kubernetes operator; delete it or choose another hostname", name)
	}
	if x := own.exclusiveOwner(); x != nil && !(x.OperatorID == operatorID && o.names(*x.Resource)) {
		if x.OperatorID != operatorID {
			//lint:ignore ST1005 the official operator's condition message, capitalized as users see it
			return fmt.Errorf("Tailscale Service %s is already used by a %s of another operator (device %s); choose another hostname", name, x.Resource.Kind, x.OperatorID)
		}
		//lint:ignore ST1005 the official operator's condition message, capitalized as users see it
		return fmt.Errorf("Tailscale Service %s is already used by %s; choose another hostname", name, describe(x.Resource))
	}
	if o.exclusive() {
		if others := own.others(operatorID); len(others) > 0 {
			//lint:ignore ST1005 the official operator's condition message, capitalized as users see it
			return fmt.Errorf("Tailscale Service %s is already used by another operator (device %s); a kube-apiserver ProxyGroup's service cannot be shared; choose another hostname", name, others[0])
		}
	}
	if r, ok := own.resources[operatorID]; ok && !o.names(r) {
		//lint:ignore ST1005 the official operator's condition message, capitalized as users see it
		return fmt.Errorf("Tailscale Service %s is already used by %s; choose another hostname", name, describe(&r))
	}
	if o.exclusive() && own.has(operatorID) && own.exclusiveOwner() == nil {
		//lint:ignore ST1005 the official operator's condition message, capitalized as users see it
		return fmt.Errorf("Tailscale Service %s is already used by another object of this cluster; choose another hostname", name)
	}
	return nil
}

// Owns reports whether the Tailscale Service names o among its owners.
func (o Owner) Owns(existing *tailnet.Service, operatorID string) bool {
	own, err := readOwners(existing, operatorID)
	if err != nil || !own.has(operatorID) {
		return false
	}
	if o.exclusive() {
		x := own.exclusiveOwner()
		return x != nil && x.OperatorID == operatorID && o.names(*x.Resource)
	}
	r, ok := own.resources[operatorID]
	return ok && o.names(r)
}

// SharedMember reads a Tailscale Service that operatorID's cluster serves
// for a member (not a kube-apiserver ProxyGroup's): the member, and the
// other operators that own the service too. ok is false for any other
// service.
func SharedMember(svc *tailnet.Service, operatorID string) (o Owner, others []string, ok bool) {
	own, err := readOwners(svc, operatorID)
	if err != nil || !own.has(operatorID) {
		return Owner{}, nil, false
	}
	r, ok := own.resources[operatorID]
	if !ok || r.Kind == kindExclusive {
		return Owner{}, nil, false
	}
	return Owner{Kind: r.Kind, Namespace: r.Namespace, Name: r.Name, UID: r.UID}, own.others(operatorID), true
}

func describe(r *OwnerResource) string {
	if r == nil {
		return "another object"
	}
	if r.Namespace == "" {
		return r.Kind + " " + r.Name
	}
	return fmt.Sprintf("%s %s/%s", r.Kind, r.Namespace, r.Name)
}

// Same compares what the operator sets.
func Same(a, b tailnet.Service) bool {
	return a.Comment == b.Comment && slices.Equal(a.Tags, b.Tags) && slices.Equal(a.Ports, b.Ports) &&
		reflect.DeepEqual(a.Annotations, b.Annotations)
}

// ShadowingDevice returns the MagicDNS name of a device whose name's first
// label is hostname ("" when none): that device and the Tailscale Service
// svc:<hostname> would share one name.
func ShadowingDevice(devices []tailnet.Device, hostname string) string {
	for _, d := range devices {
		if label, _, _ := strings.Cut(d.Name, "."); strings.EqualFold(label, hostname) {
			return d.Name
		}
	}
	return ""
}
