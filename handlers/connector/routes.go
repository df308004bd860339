package connector

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tailplane/tailplane/handlers/lib/conditions"
	"github.com/tailplane/tailplane/handlers/lib/proxyset"
)

// ConditionRoutesApproved (Tailplane's) says whether control approved every
// route the Connector's devices advertise. It is there only while some
// device advertises routes.
const ConditionRoutesApproved = "RoutesApproved"

// The reasons of ConditionRoutesApproved. ReasonRoutesPendingApproval is
// the grace period after routes appear unapproved: a policy's
// autoApprovers approve them a moment after the device advertises them, so
// only routes still unapproved after it earn RoutesNotApproved, with its
// Warning Event.
const (
	ReasonRoutesApproved        = "RoutesApproved"
	ReasonRoutesPendingApproval = "RoutesPendingApproval"
	messageRoutesApproved       = "every advertised route is approved"
)

// Approval is what the Connector's devices' routes come to.
type Approval struct {
	// Condition is RoutesApproved to set; nil when no device advertises a
	// route (the condition is removed).
	Condition *metav1.Condition
	// Restart says the unapproved routes changed: the condition replaces
	// the stored one with a new transition time, so the grace starts over.
	Restart bool
	// Warn says the routes stayed unapproved past the grace and the
	// stored condition did not say so yet: post RoutesNotApproved.
	Warn bool
	// Recheck, when not zero, is when to look again (the grace ends).
	Recheck time.Duration
}

// RouteApproval decides RoutesApproved from the devices' routes and the
// stored conditions: unapproved routes are pending for grace (measured from
// the stored condition, so an operator restart does not restart it), then
// not approved. headscale names Headscale's CLI in the message.
func RouteApproval(stored []metav1.Condition, devices []proxyset.Device, now time.Time, grace time.Duration, headscale bool) Approval {
	advertised := false
	for _, d := range devices {
		advertised = advertised || len(d.AdvertisedRoutes) > 0
	}
	if !advertised {
		return Approval{}
	}
	c := metav1.Condition{Type: ConditionRoutesApproved, Status: metav1.ConditionTrue, Reason: ReasonRoutesApproved, Message: messageRoutesApproved}
	list := unapprovedList(devices)
	if list == "" {
		return Approval{Condition: &c}
	}
	pending := fmt.Sprintf("waiting up to %s for control to approve the routes advertised (%s)", grace, list)
	notApproved := UnapprovedRoutes(devices, headscale)
	c.Status = metav1.ConditionFalse
	old := meta.FindStatusCondition(stored, ConditionRoutesApproved)
	same := old != nil && old.Status == metav1.ConditionFalse && (old.Message == pending || old.Message == notApproved)
	since := now
	if same {
		since = old.LastTransitionTime.Time
	}
	if left := grace - now.Sub(since); left > 0 {
		c.Reason, c.Message, c.LastTransitionTime = ReasonRoutesPendingApproval, pending, metav1.NewTime(since)
		return Approval{Condition: &c, Restart: !same, Recheck: left}
	}
	c.Reason, c.Message, c.LastTransitionTime = ReasonRoutesNotApproved, notApproved, metav1.NewTime(since)
	return Approval{Condition: &c, Restart: !same, Warn: conditions.Changed(stored, c)}
}

// SetApproval returns conds with a's condition set (or RoutesApproved
// removed).
func SetApproval(conds []metav1.Condition, a Approval) []metav1.Condition {
	if a.Condition == nil {
		return conditions.Remove(conds, ConditionRoutesApproved)
	}
	if a.Restart {
		conds = conditions.Remove(conds, ConditionRoutesApproved)
	}
	return conditions.Set(conds, *a.Condition)
}

// unapprovedList names each device's unapproved routes: "10.0.0.0/8 by
// sr-0; ..." ("" when control approved them all).
func unapprovedList(devices []proxyset.Device) string {
	var parts []string
	for _, d := range devices {
		if r := d.UnapprovedRoutes(); len(r) > 0 {
			parts = append(parts, fmt.Sprintf("%s by %s", strings.Join(r, ", "), shortName(d)))
		}
	}
	return strings.Join(parts, "; ")
}

// UnapprovedRoutes says which devices advertise routes the tailnet has not
// approved, and what to do about it ("" when every route is approved): on
// Headscale, the command that approves them (which sets a node's approved
// routes to exactly the list given, so it lists every route the device
// advertises); elsewhere, the admin console or the API.
func UnapprovedRoutes(devices []proxyset.Device, headscale bool) string {
	list := unapprovedList(devices)
	if list == "" {
		return ""
	}
	msg := "routes advertised but not approved, so no client uses them yet: " + list + ". "
	if !headscale {
		return msg + "Approve them in the tailnet's admin console or through the API, or let autoApprovers in the tailnet policy approve them"
	}
	var cmds []string
	for _, d := range devices {
		if len(d.UnapprovedRoutes()) > 0 {
			cmds = append(cmds, fmt.Sprintf("`headscale nodes approve-routes --identifier %s --routes %s` (%s)", d.ID, strings.Join(d.AdvertisedRoutes, ","), shortName(d)))
		}
	}
	return msg + "Approve them with " + strings.Join(cmds, ", ") + ", or let autoApprovers in the Headscale policy approve them"
}

// shortName is the device's hostname: its MagicDNS name's first label.
func shortName(d proxyset.Device) string {
	name, _, _ := strings.Cut(d.FQDN, ".")
	return name
}
