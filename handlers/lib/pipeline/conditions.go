package pipeline

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The official condition of Services with a proxy of their own (exposed,
// LoadBalancer and egress), with its reasons, and the official Warning
// Event reason of refused Services.
const (
	ConditionProxyReady  = "TailscaleProxyReady"
	ReasonProxyCreated   = "ProxyCreated"
	ReasonProxyPending   = "ProxyPending"
	ReasonProxyInvalid   = "ProxyInvalid"
	ReasonProxyFailed    = "ProxyFailed"
	ReasonInvalidService = "INVALIDSERVICE"
	// ReasonProxyRenaming (a Normal Event, Tailplane's own) says the
	// hostname changed and the device does not have the new name yet.
	ReasonProxyRenaming = "ProxyRenaming"
)

// ServiceReport is how an outcome shows on a Service.
type ServiceReport struct {
	// Condition is TailscaleProxyReady.
	Condition metav1.Condition
	// EventType, EventReason and EventMessage are the Event to post with
	// it (none when EventReason is empty): a Warning for refused input and
	// refused auth keys, which a user can act on; Normal for a rename in
	// progress.
	EventType, EventReason, EventMessage string
}

// ForService maps an outcome to a Service's condition and Event, as the
// official operator reports them.
func ForService(out Outcome) ServiceReport {
	c := metav1.Condition{Type: ConditionProxyReady, Status: metav1.ConditionFalse}
	var r ServiceReport
	switch out.Stage {
	case Invalid:
		c.Reason, c.Message = ReasonProxyInvalid, "unable to provision proxy resources: invalid Service: "+out.Message
		r.EventType, r.EventReason, r.EventMessage = corev1.EventTypeWarning, ReasonInvalidService, c.Message
	case Waiting, Pending:
		c.Reason, c.Message = ReasonProxyPending, out.Message
		if out.Cause == CauseRenaming {
			r.EventType, r.EventReason, r.EventMessage = corev1.EventTypeNormal, ReasonProxyRenaming, out.Message
		}
	case Failed:
		c.Reason, c.Message = ReasonProxyFailed, out.Message
		if out.Cause == CauseAuthKey {
			r.EventType, r.EventReason, r.EventMessage = corev1.EventTypeWarning, ReasonProxyFailed, out.Message
		}
	case Ready:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, ReasonProxyCreated, ReasonProxyCreated
	}
	r.Condition = c
	return r
}
