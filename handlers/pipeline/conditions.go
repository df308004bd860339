package pipeline

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
)

// ServiceReport is how an outcome shows on a Service.
type ServiceReport struct {
	// Condition is TailscaleProxyReady.
	Condition metav1.Condition
	// EventReason and EventMessage are the Warning Event to post with it
	// (none when EventReason is empty): refused input, and refused auth
	// keys, which a user can act on.
	EventReason, EventMessage string
}

// ForService maps an outcome to a Service's condition and Event, as the
// official operator reports them.
func ForService(out Outcome) ServiceReport {
	c := metav1.Condition{Type: ConditionProxyReady, Status: metav1.ConditionFalse}
	var r ServiceReport
	switch out.Stage {
	case Invalid:
		c.Reason, c.Message = ReasonProxyInvalid, "unable to provision proxy resources: invalid Service: "+out.Message
		r.EventReason, r.EventMessage = ReasonInvalidService, c.Message
	case Waiting, Pending:
		c.Reason, c.Message = ReasonProxyPending, out.Message
	case Failed:
		c.Reason, c.Message = ReasonProxyFailed, out.Message
		if out.Cause == CauseAuthKey {
			r.EventReason, r.EventMessage = ReasonProxyFailed, out.Message
		}
	case Ready:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, ReasonProxyCreated, ReasonProxyCreated
	}
	r.Condition = c
	return r
}
