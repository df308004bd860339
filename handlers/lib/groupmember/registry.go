package groupmember

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tailplane/tailplane/proxy/config"
	"github.com/tailplane/tailplane/runtime"
)

// Kind is one kind of member as its group sees it.
type Kind interface {
	// Keys are the members of this kind of the group named group.
	Keys(group string) []runtime.Key
}

// ServiceSource is a kind whose members are Tailscale Services that every
// replica of an ingress group hosts.
type ServiceSource interface {
	Kind
	// Services renders the group's members of this kind for its replicas'
	// configs. A member that is gone or cannot be served is left out: its
	// own handler says why.
	Services(ctx context.Context, group string) ([]Hosted, error)
}

// Hosted is one member's piece of an ingress group's replicas' config.
type Hosted struct {
	// Service is what every replica hosts.
	Service config.Service
	// Secrets are the Secrets the replicas must be allowed to read (the
	// shared certificate, plugin module copies).
	Secrets []string
	// Created is the member's creation time: of two members that want one
	// Tailscale Service, the older one keeps it.
	Created metav1.Time
}

// EgressSource is a kind whose members are targets of an egress group,
// reached through ports the group allocates.
type EgressSource interface {
	Kind
	// EgressClaims are the group's admitted members of this kind (holding
	// their finalizer, not leaving), whose cluster Services the group
	// makes.
	EgressClaims(ctx context.Context, group string) ([]EgressClaim, error)
}

// EgressClaim is an admitted egress member as the group's port allocation
// sees it.
type EgressClaim struct {
	*Egress
	// Key is the member: handled again once its cluster Service changed.
	Key runtime.Key
	// Refuse shows on the member why the group cannot serve it (no port
	// left in the range).
	Refuse func(ctx context.Context, msg string) error
}

// Registry holds the member kinds, in the order they joined (the order
// their members are read in). The zero value is empty and ready to use.
type Registry struct{ kinds []Kind }

// Add has the group's handlers ask k for its members.
func (r *Registry) Add(k Kind) { r.kinds = append(r.kinds, k) }

// Keys are the group's members of every kind.
func (r *Registry) Keys(group string) []runtime.Key {
	var out []runtime.Key
	for _, k := range r.kinds {
		out = append(out, k.Keys(group)...)
	}
	return out
}

// Services are the Tailscale Services of the group's members of every
// kind, kind by kind; the group decides between two that want one name.
func (r *Registry) Services(ctx context.Context, group string) ([]Hosted, error) {
	return ask(r, func(s ServiceSource) ([]Hosted, error) { return s.Services(ctx, group) })
}

// EgressClaims are the group's admitted egress members of every kind.
func (r *Registry) EgressClaims(ctx context.Context, group string) ([]EgressClaim, error) {
	return ask(r, func(s EgressSource) ([]EgressClaim, error) { return s.EgressClaims(ctx, group) })
}

// ask collects f's answers from the kinds that are an S, in order.
func ask[S any, T any](r *Registry, f func(S) ([]T, error)) ([]T, error) {
	var out []T
	for _, k := range r.kinds {
		if s, ok := k.(S); ok {
			ts, err := f(s)
			if err != nil {
				return nil, err
			}
			out = append(out, ts...)
		}
	}
	return out, nil
}
