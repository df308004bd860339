// Package unsupported is the handler module of the official kinds that
// Tailplane installs but does not run yet (Recorder, PeerRelay):
// instead of ignoring them, it tells their users so, in the kind's own Ready
// condition (False, reason NotSupported) and a Warning Event, with what to
// use instead.
//
// This file is the pure part (which kinds, and what to say); register.go
// applies it. It imports crds/ and Kubernetes API types; register.go also
// runtime/ and handlers/lib/cluster.
package unsupported

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/tailplane/tailplane/crds/tailscale/v1alpha1"
)

// ReasonNotSupported is the condition reason and Warning Event reason.
const ReasonNotSupported = "NotSupported"

// Kind is an official kind that Tailplane accepts without running it.
type Kind struct {
	// Kind and Resource name it.
	Kind     string
	Resource schema.GroupVersionResource
	// Condition is the type of its Ready condition.
	Condition string
	// Message says that nothing runs and what to use instead.
	Message string
}

// Kinds returns the official kinds Tailplane does not run yet.
func Kinds() []Kind {
	return []Kind{
		{
			Kind: "Recorder", Resource: v1alpha1.RecordersResource, Condition: v1alpha1.RecorderReady,
			Message: "Tailplane does not support Recorder yet: no tsrecorder is deployed and no SSH session is recorded. " +
				"Run tsrecorder yourself instead (the tailscale/tsrecorder image, as a StatefulSet or on a VM, with an auth key tagged as your " +
				"tailnet policy's recorder; see Tailscale's SSH session recording documentation), and point the policy's ssh recorder setting at it.",
		},
		{
			Kind: "PeerRelay", Resource: v1alpha1.PeerRelaysResource, Condition: v1alpha1.PeerRelayReady,
			Message: "Tailplane does not support PeerRelay yet: no peer relay is deployed. " +
				"Run a peer relay instead on a tailnet device with a reachable UDP port (`tailscale set --relay-server-port=<port>`), " +
				"and allow it in the tailnet policy with a grant of the tailscale.com/cap/relay capability (see Tailscale's peer relay documentation).",
		},
	}
}

// ReadyCondition is the Ready condition of an object of kind k at
// generation.
func (k Kind) ReadyCondition(generation int64) metav1.Condition {
	return metav1.Condition{Type: k.Condition, Status: metav1.ConditionFalse, Reason: ReasonNotSupported,
		Message: k.Message, ObservedGeneration: generation}
}
