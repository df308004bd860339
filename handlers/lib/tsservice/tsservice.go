// Package tsservice keeps Tailscale Services (svc:<hostname>) that
// Kubernetes objects own: the owner annotation the official operator
// writes, the service an owner wants given the one that exists (never
// taking another's), sweeping an owner's services out of a tailnet, and the
// shared certificate Secret through which a group's replicas serve one
// service's TLS. ProxyGroup members and kube-apiserver groups own them
// today; Gateway routes next.
//
// tsservice.go is pure; secrets.go and Sweep talk to the API server and the
// tailnet. It may import handlers/lib/proxyset, internal/proxystate and
// internal/tailnet.
package tsservice

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/tailplane/tailplane/internal/tailnet"
)

// AnnotationOwnerReferences, on a Tailscale Service, names the operators
// (and here, always, the object) it belongs to; the official name.
const AnnotationOwnerReferences = "tailscale.com/owner-references"

const comment = "This Tailscale Service is managed by the Tailplane operator, do not modify"

// Name is the Tailscale Service of a hostname, "svc:<hostname>".
func Name(hostname string) string { return "svc:" + hostname }

// Owner is the object a Tailscale Service belongs to.
type Owner struct {
	Kind, Namespace, Name string
	UID                   types.UID
}

// OwnerRef is one owner of a Tailscale Service, as recorded in
// AnnotationOwnerReferences.
type OwnerRef struct {
	OperatorID string         `json:"operatorID,omitempty"`
	Resource   *OwnerResource `json:"resource,omitempty"`
}

// OwnerResource names the object that owns a Tailscale Service.
type OwnerResource struct {
	Kind      string    `json:"kind,omitempty"`
	Name      string    `json:"name,omitempty"`
	Namespace string    `json:"namespace,omitempty"`
	UID       types.UID `json:"uid,omitempty"`
}

type ownerRefs struct {
	OwnerRefs []OwnerRef `json:"ownerRefs"`
}

// is reports whether r names o, as operatorID's.
func (o Owner) is(r OwnerRef, operatorID string) bool {
	return r.OperatorID == operatorID && r.Resource != nil && r.Resource.Kind == o.Kind &&
		r.Resource.Namespace == o.Namespace && r.Resource.Name == o.Name
}

// Owners reads a Tailscale Service's owner annotation (nil when absent).
func Owners(svc *tailnet.Service) ([]OwnerRef, error) {
	raw := svc.Annotations[AnnotationOwnerReferences]
	if raw == "" {
		return nil, nil
	}
	var o ownerRefs
	if err := json.Unmarshal([]byte(raw), &o); err != nil {
		//lint:ignore ST1005 the official operator's condition message, capitalized as users see it
		return nil, fmt.Errorf("Tailscale Service %s: annotation %s is not valid JSON: %w", svc.Name, AnnotationOwnerReferences, err)
	}
	return o.OwnerRefs, nil
}

// Desired is the Tailscale Service hostname that o wants with tags and
// ports ("tcp:443"), given the one that exists (nil when none): addresses
// and other annotations are kept. An existing service that o may not take
// (made by hand, or another object's) is an error: two objects never
// silently share a name.
func Desired(o Owner, hostname string, tags, ports []string, existing *tailnet.Service, operatorID string) (tailnet.Service, error) {
	want := tailnet.Service{Name: Name(hostname), Comment: comment, Tags: tags, Ports: ports, Annotations: map[string]string{}}
	mine := OwnerRef{OperatorID: operatorID, Resource: &OwnerResource{Kind: o.Kind, Name: o.Name, Namespace: o.Namespace, UID: o.UID}}
	if existing != nil {
		old, err := Owners(existing)
		if err != nil {
			return want, err
		}
		if len(old) == 0 {
			//lint:ignore ST1005 the official operator's condition message, capitalized as users see it
			return want, fmt.Errorf("Tailscale Service %s already exists and is not managed by a Kubernetes operator; delete it or choose another hostname", want.Name)
		}
		for _, r := range old {
			switch {
			case o.is(r, operatorID):
				// Ours, perhaps from an earlier object of the same name.
			case r.OperatorID == operatorID:
				//lint:ignore ST1005 the official operator's condition message, capitalized as users see it
				return want, fmt.Errorf("Tailscale Service %s is already used by %s; choose another hostname", want.Name, describe(r.Resource))
			default:
				//lint:ignore ST1005 the official operator's condition message, capitalized as users see it
				return want, fmt.Errorf("Tailscale Service %s is already used by another operator (device %s); choose another hostname", want.Name, r.OperatorID)
			}
		}
		want.Addrs = existing.Addrs
		for k, v := range existing.Annotations {
			want.Annotations[k] = v
		}
	}
	raw, err := json.Marshal(ownerRefs{OwnerRefs: []OwnerRef{mine}})
	if err != nil {
		return want, err
	}
	want.Annotations[AnnotationOwnerReferences] = string(raw)
	return want, nil
}

// Owns reports whether the Tailscale Service names o among its owners.
func (o Owner) Owns(existing *tailnet.Service, operatorID string) bool {
	old, err := Owners(existing)
	return err == nil && slices.ContainsFunc(old, func(r OwnerRef) bool { return o.is(r, operatorID) })
}

func describe(r *OwnerResource) string {
	if r == nil {
		return "another object"
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
