package tsservice

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/types"

	"github.com/tailplane/tailplane/internal/tailnet"
)

// AnnotationOwnerReferences, on a Tailscale Service, lists the operators
// that own it; the official name and shape. A shared service's references
// name only operators ({"operatorID":...}), so that the official operator
// of another cluster may co-own it; a kube-apiserver ProxyGroup's names its
// group too.
const AnnotationOwnerReferences = "tailscale.com/owner-references"

// AnnotationOwnerResources (Tailplane's), on a shared Tailscale Service,
// maps each Tailplane operator that owns it to the object in its cluster
// that does: the official references carry no object, and a cluster must
// still refuse a second object of its own for the same name and find the
// services an object leaves behind when its hostname changes. The
// official operator keeps annotations it does not know.
const AnnotationOwnerResources = "tailplane.dev/owner-resources"

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

// owners is what a Tailscale Service's annotations say of its owners.
type owners struct {
	refs []OwnerRef
	// resources are AnnotationOwnerResources, by operator ID.
	resources map[string]OwnerResource
}

// Owners reads a Tailscale Service's owner references (nil when absent).
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

// readOwners reads both annotations of svc. Tailplane before shared
// services wrote its member's object into its own reference: such a
// reference of operatorID is read as the object in resources.
func readOwners(svc *tailnet.Service, operatorID string) (owners, error) {
	refs, err := Owners(svc)
	if err != nil {
		return owners{}, err
	}
	o := owners{refs: refs, resources: map[string]OwnerResource{}}
	if raw := svc.Annotations[AnnotationOwnerResources]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &o.resources); err != nil {
			//lint:ignore ST1005 the Tailscale Service's name leads, as in the official messages
			return owners{}, fmt.Errorf("Tailscale Service %s: annotation %s is not valid JSON: %w", svc.Name, AnnotationOwnerResources, err)
		}
	}
	var kept []OwnerRef
	for _, r := range refs {
		if r.OperatorID == operatorID && r.Resource != nil && r.Resource.Kind != kindExclusive {
			if _, ok := o.resources[operatorID]; !ok {
				o.resources[operatorID] = *r.Resource
			}
			r = OwnerRef{OperatorID: operatorID}
		}
		if r.Resource == nil && slices.ContainsFunc(kept, func(k OwnerRef) bool { return k.Resource == nil && k.OperatorID == r.OperatorID }) {
			continue
		}
		kept = append(kept, r)
	}
	o.refs = kept
	return o, nil
}

// has reports whether operatorID owns the service (in any form).
func (o owners) has(operatorID string) bool {
	return slices.ContainsFunc(o.refs, func(r OwnerRef) bool { return r.OperatorID == operatorID })
}

// others are the operators besides operatorID that own the service.
func (o owners) others(operatorID string) []string {
	var out []string
	for _, r := range o.refs {
		if r.OperatorID != operatorID && !slices.Contains(out, r.OperatorID) {
			out = append(out, r.OperatorID)
		}
	}
	return out
}

// exclusiveOwner is the reference that names an object (a kube-apiserver
// ProxyGroup holds its service alone), nil when none does.
func (o owners) exclusiveOwner() *OwnerRef {
	for i := range o.refs {
		if o.refs[i].Resource != nil {
			return &o.refs[i]
		}
	}
	return nil
}

// without removes operatorID's references and object.
func (o owners) without(operatorID string) owners {
	out := owners{resources: maps.Clone(o.resources)}
	out.refs = slices.DeleteFunc(slices.Clone(o.refs), func(r OwnerRef) bool { return r.OperatorID == operatorID })
	delete(out.resources, operatorID)
	return out
}

// write sets both annotations on annotations from o, keeping only the
// objects of operators that still own the service.
func (o owners) write(annotations map[string]string) error {
	raw, err := json.Marshal(ownerRefs{OwnerRefs: o.refs})
	if err != nil {
		return err
	}
	annotations[AnnotationOwnerReferences] = string(raw)
	kept := map[string]OwnerResource{}
	for id, r := range o.resources {
		if o.has(id) {
			kept[id] = r
		}
	}
	if len(kept) == 0 {
		delete(annotations, AnnotationOwnerResources)
		return nil
	}
	if raw, err = json.Marshal(kept); err != nil {
		return err
	}
	annotations[AnnotationOwnerResources] = string(raw)
	return nil
}
