package connector

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tailplane/tailplane/crds/tailscale/v1alpha1"
	"github.com/tailplane/tailplane/handlers/lib/pipeline"
	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/handlers/lib/settings"
	"github.com/tailplane/tailplane/proxy/config"
)

// ParentType is the official parent type label of a Connector's children
// (whose parent namespace label is "", as the official operator writes it).
const ParentType = "connector"

// The official condition and reasons, and message formats.
const (
	ConditionReady                = "ConnectorReady"
	ReasonConnectorCreated        = "ConnectorCreated"
	ReasonConnectorCreating       = "ConnectorCreating"
	ReasonConnectorCreationFailed = "ConnectorCreationFailed"
	ReasonConnectorInvalid        = "ConnectorInvalid"
	messageInvalid                = "Connector is invalid: %v"
	// ReasonRoutesNotApproved (Tailplane's) says a device advertises
	// routes the tailnet has not approved: clients cannot use them yet.
	ReasonRoutesNotApproved = "RoutesNotApproved"
	// ReasonProxyPending (Tailplane's, as on Ingresses) says the
	// Connector waits for its ProxyClass.
	ReasonProxyPending    = "ProxyPending"
	messageCreationFailed = "Failed creating Connector: %v"
)

// tailnetRanges are the tailnet's own addresses: a route covering them would
// send tailnet traffic through the connector.
var tailnetRanges = []netip.Prefix{netip.MustParsePrefix("100.64.0.0/10"), netip.MustParsePrefix("fd7a:115c:a1e0::/48")}

// Replicas is the number of devices: spec.replicas, 1 when unset.
func Replicas(cn *v1alpha1.Connector) int {
	if cn.Spec.Replicas == nil {
		return 1
	}
	return max(int(*cn.Spec.Replicas), 0)
}

// Hostnames are the replicas' tailnet hostnames: hostnamePrefix-<ordinal>
// when the prefix is set; otherwise spec.hostname (default
// <name>-connector) for a single replica, and that name with -<ordinal>
// for several, so that every device has a name of its own (the official
// operator gives them all one name and lets control add suffixes).
func Hostnames(cn *v1alpha1.Connector) []string {
	n := Replicas(cn)
	prefix := cn.Spec.HostnamePrefix
	if prefix == "" && n == 1 {
		h := cn.Spec.Hostname
		if h == "" {
			h = cn.Name + "-connector"
		}
		return []string{h}
	}
	if prefix == "" {
		prefix = cn.Name + "-connector"
	}
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}

// Validate repeats the CRD's CEL rules (in case they were bypassed) and
// checks what CEL cannot: every route is a masked prefix, none overlaps
// another or the tailnet's own addresses, and the hostnames are DNS labels.
// The messages are the official operator's where it has them.
func Validate(cn *v1alpha1.Connector, defaultTags []string) error {
	s := cn.Spec
	var errs []error
	if s.SubnetRouter == nil && !s.ExitNode && s.AppConnector == nil {
		errs = append(errs, errors.New("invalid spec: a Connector must be configured as at least one of subnet router, exit node or app connector"))
	}
	if (s.SubnetRouter != nil || s.ExitNode) && s.AppConnector != nil {
		errs = append(errs, errors.New("invalid spec: a Connector that is configured as an app connector must not be also configured as a subnet router or exit node"))
	}
	if s.Replicas != nil && *s.Replicas > 1 && s.Hostname != "" {
		errs = append(errs, errors.New("invalid spec: a Connector that is configured with multiple replicas cannot specify a hostname. Instead, use a hostnamePrefix"))
	}
	if s.HostnamePrefix != "" && s.Hostname != "" {
		errs = append(errs, errors.New("invalid spec: a Connect cannot use both a hostname and hostname prefix"))
	}
	if s.SubnetRouter != nil && len(s.SubnetRouter.AdvertiseRoutes) == 0 {
		errs = append(errs, errors.New("invalid subnet router spec: no routes defined"))
	}
	errs = append(errs, validateRoutes(Routes(cn)))
	for _, h := range Hostnames(cn) {
		if err := proxyset.ValidHostname(h); err != nil {
			errs = append(errs, fmt.Errorf("invalid hostname %q: %v", h, err))
		}
	}
	if _, err := Tags(cn, defaultTags); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func validateRoutes(routes []string) error {
	var errs []error
	var seen []netip.Prefix
	for _, r := range routes {
		p, err := netip.ParsePrefix(r)
		if err != nil {
			errs = append(errs, fmt.Errorf("route %v is invalid: %v", r, err))
			continue
		}
		if p.Masked() != p {
			errs = append(errs, fmt.Errorf("route %s has non-address bits set; expected %s", p, p.Masked()))
			continue
		}
		if p.Bits() == 0 {
			errs = append(errs, fmt.Errorf("route %s covers every address; use exitNode: true instead", p))
			continue
		}
		for _, t := range tailnetRanges {
			if p.Overlaps(t) {
				errs = append(errs, fmt.Errorf("route %s overlaps the tailnet's own addresses %s", p, t))
			}
		}
		for _, o := range seen {
			if p.Overlaps(o) {
				errs = append(errs, fmt.Errorf("route %s overlaps route %s", p, o))
			}
		}
		seen = append(seen, p)
	}
	return errors.Join(errs...)
}

// Tags are the devices' tags: spec.tags, else the operator's proxy tags.
func Tags(cn *v1alpha1.Connector, defaults []string) ([]string, error) {
	return settings.SpecTags(cn.Spec.Tags.Strings(), defaults)
}

// Routes are the routes the devices advertise besides the exit routes: the
// subnet router's, or an app connector's pre-configured ones.
func Routes(cn *v1alpha1.Connector) []string {
	switch {
	case cn.Spec.SubnetRouter != nil:
		return cn.Spec.SubnetRouter.AdvertiseRoutes
	case cn.Spec.AppConnector != nil:
		return cn.Spec.AppConnector.Routes
	}
	return nil
}

// Plan is the proxy cn asks for: one replica per hostname advertising its
// routes, or Invalid with why cn is refused. pipeline.Render turns it into
// the proxy's objects.
func Plan(cn *v1alpha1.Connector, s settings.Settings) *pipeline.Plan {
	if err := Validate(cn, s.ProxyTags); err != nil {
		return &pipeline.Plan{Invalid: err.Error()}
	}
	tags, _ := Tags(cn, s.ProxyTags)
	return &pipeline.Plan{
		Hostnames: Hostnames(cn), Tags: tags, ProxyClass: cn.Spec.ProxyClass,
		Config: func(i int) (*config.Config, error) { return Config(cn, tags, i), nil },
	}
}

// Config is replica ordinal's proxy config.
func Config(cn *v1alpha1.Connector, tags []string, ordinal int) *config.Config {
	return &config.Config{
		Version: config.Version, Hostname: Hostnames(cn)[ordinal], Tags: tags,
		Role: config.RoleConnector,
		Connector: &config.Connector{Routes: Routes(cn), ExitNode: cn.Spec.ExitNode,
			AppConnector: cn.Spec.AppConnector != nil},
	}
}

// Status is the Connector's status for an outcome of the pipeline, with
// ConnectorReady carrying the official reasons and the generation observed.
func Status(cn *v1alpha1.Connector, out pipeline.Outcome) v1alpha1.ConnectorStatus {
	st := v1alpha1.ConnectorStatus{Conditions: cn.Status.Conditions, IsExitNode: cn.Spec.ExitNode,
		IsAppConnector: cn.Spec.AppConnector != nil}
	if cn.Spec.SubnetRouter != nil {
		st.SubnetRoutes = strings.Join(cn.Spec.SubnetRouter.AdvertiseRoutes, ",")
	}
	if out.Stage == pipeline.Invalid || out.Stage == pipeline.Failed {
		// What the devices were last given: a refused spec reached none
		// of them (the official operator, too, writes these only once the
		// spec is provisioned).
		st.SubnetRoutes, st.IsExitNode, st.IsAppConnector = cn.Status.SubnetRoutes, cn.Status.IsExitNode, cn.Status.IsAppConnector
	}
	for _, d := range out.Devices {
		if d.FQDN != "" {
			st.Devices = append(st.Devices, v1alpha1.ConnectorDevice{Hostname: d.FQDN, TailnetIPs: d.IPs})
		}
	}
	if len(st.Devices) > 0 {
		st.Hostname, st.TailnetIPs = st.Devices[0].Hostname, st.Devices[0].TailnetIPs
	}
	c := metav1.Condition{Type: ConditionReady, Status: metav1.ConditionFalse, ObservedGeneration: cn.Generation}
	switch out.Stage {
	case pipeline.Invalid:
		c.Reason, c.Message = ReasonConnectorInvalid, fmt.Sprintf(messageInvalid, out.Message)
	case pipeline.Failed:
		c.Reason, c.Message = ReasonConnectorCreationFailed, fmt.Sprintf(messageCreationFailed, out.Message)
	case pipeline.Waiting, pipeline.Pending:
		c.Reason, c.Message = ReasonConnectorCreating, out.Message
	case pipeline.Ready:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, ReasonConnectorCreated, ReasonConnectorCreated
	}
	if old := meta.FindStatusCondition(st.Conditions, ConditionReady); old != nil && old.Status == c.Status {
		c.LastTransitionTime = old.LastTransitionTime
	} else {
		c.LastTransitionTime = metav1.NewTime(time.Now().Truncate(time.Second))
	}
	st.Conditions = slices.Clone(st.Conditions)
	meta.SetStatusCondition(&st.Conditions, c)
	return st
}
