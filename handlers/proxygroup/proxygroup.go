package proxygroup

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/tailplane/tailplane/crds/tailscale/v1alpha1"
	"github.com/tailplane/tailplane/handlers/lib/groupmember"
	"github.com/tailplane/tailplane/handlers/lib/pipeline"
	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/handlers/lib/settings"
	"github.com/tailplane/tailplane/proxy/config"
)

// Event reasons and messages, the official ones.
const (
	// ReasonInvalid is posted with the condition's ProxyGroupInvalid.
	ReasonInvalid = v1alpha1.ReasonProxyGroupInvalid
	// messageAvailable is ProxyGroupAvailable's message.
	messageAvailable = "%d/%d ProxyGroup pods running"
	// messageInvalidAvailable is ProxyGroupAvailable's message while the
	// group is refused (Tailplane's: the official says "0/N pods running"
	// with reason ProxyGroupCreating, though nothing is created).
	messageInvalidAvailable = "no ProxyGroup pods run: the ProxyGroup is invalid (see ProxyGroupReady)"
)

// ofType is a predicate of ProxyGroups of type t, read from the object as
// it is (a handler filter runs before decoding).
func ofType(t v1alpha1.ProxyGroupType) func(*unstructured.Unstructured) bool {
	return func(obj *unstructured.Unstructured) bool {
		typ, _, _ := unstructured.NestedString(obj.Object, "spec", "type")
		return typ == string(t)
	}
}

// hostnames are the replicas' tailnet hostnames: <hostnamePrefix or
// name>-<ordinal>.
func hostnames(pg *v1alpha1.ProxyGroup) []string {
	prefix := string(pg.Spec.HostnamePrefix)
	if prefix == "" {
		prefix = pg.Name
	}
	out := make([]string, groupmember.Replicas(pg))
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}

// groupTags are the devices' tags: spec.tags, else the operator's proxy tags.
func groupTags(pg *v1alpha1.ProxyGroup, defaults []string) ([]string, error) {
	return settings.SpecTags(pg.Spec.Tags.Strings(), defaults)
}

// proxyClassName is spec.proxyClass, else the operator's default
// (PROXY_DEFAULT_CLASS), as the official operator falls back.
func proxyClassName(pg *v1alpha1.ProxyGroup, defaultClass string) string {
	if pg.Spec.ProxyClass != "" {
		return pg.Spec.ProxyClass
	}
	return defaultClass
}

// validate checks what the CRD's schema cannot: the hostnames are DNS
// labels, the tags parse, and the type is one this operator runs.
func validate(pg *v1alpha1.ProxyGroup, defaultTags []string) error {
	var errs []error
	switch pg.Spec.Type {
	case v1alpha1.ProxyGroupTypeIngress, v1alpha1.ProxyGroupTypeEgress:
	case v1alpha1.ProxyGroupTypeKubeAPIServer:
		if err := proxyset.ValidHostname(apiServerHostname(pg)); err != nil {
			errs = append(errs, fmt.Errorf("invalid kubeAPIServer.hostname %q: %v", apiServerHostname(pg), err))
		}
	default:
		errs = append(errs, fmt.Errorf("unknown ProxyGroup type %q", pg.Spec.Type))
	}
	for _, h := range hostnames(pg) {
		if err := proxyset.ValidHostname(h); err != nil {
			errs = append(errs, fmt.Errorf("invalid hostname %q: %v", h, err))
			break
		}
	}
	if _, err := groupTags(pg, defaultTags); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// ingressConfig is replica ordinal's config of an ingress group: every
// member's Tailscale Service; replica 0 issues the shared certificates.
func ingressConfig(pg *v1alpha1.ProxyGroup, services []config.Service, tags []string, ordinal int) *config.Config {
	own := make([]config.Service, len(services))
	for i, s := range services {
		own[i] = s.Issuing(ordinal == 0)
	}
	return &config.Config{
		Version: config.Version, Hostname: hostnames(pg)[ordinal], Tags: tags,
		Role: config.RoleIngressGroup, Group: &config.Group{Services: own},
	}
}

// egressConfig is replica ordinal's config of an egress group: every
// member's target.
func egressConfig(pg *v1alpha1.ProxyGroup, targets []config.EgressTarget, tags []string, ordinal int) *config.Config {
	return &config.Config{
		Version: config.Version, Hostname: hostnames(pg)[ordinal], Tags: tags,
		Role: config.RoleEgress, Egress: &config.Egress{Targets: targets},
	}
}

// groupStatus is the ProxyGroup's status for an outcome of the pipeline whose
// Serving are the devices of the replicas that run (runningDevices):
// ProxyGroupReady (every replica runs, with the generation observed) and
// ProxyGroupAvailable (at least one does), with the official reasons.
func groupStatus(pg *v1alpha1.ProxyGroup, out pipeline.Outcome) v1alpha1.ProxyGroupStatus {
	st := v1alpha1.ProxyGroupStatus{Conditions: slices.Clone(pg.Status.Conditions)}
	for _, d := range out.Serving {
		name, _, _ := strings.Cut(d.FQDN, ".")
		st.Devices = append(st.Devices, v1alpha1.TailnetDevice{Hostname: name, TailnetIPs: d.IPs})
	}
	ready := metav1.Condition{Type: v1alpha1.ProxyGroupReady, Status: metav1.ConditionFalse, ObservedGeneration: pg.Generation}
	switch out.Stage {
	case pipeline.Invalid:
		ready.Reason, ready.Message = v1alpha1.ReasonProxyGroupInvalid, out.Message
	case pipeline.Failed:
		ready.Reason, ready.Message = v1alpha1.ReasonProxyGroupCreationFailed, out.Message
		if out.Cause == pipeline.CauseTailnet {
			ready.Reason = v1alpha1.ReasonProxyGroupTailnetUnavailable
		}
	case pipeline.Waiting, pipeline.Pending:
		ready.Reason, ready.Message = v1alpha1.ReasonProxyGroupCreating, out.Message
	case pipeline.Ready:
		ready.Status, ready.Reason, ready.Message = metav1.ConditionTrue, v1alpha1.ReasonProxyGroupReady, "ProxyGroup is ready"
	}
	want := groupmember.Replicas(pg)
	if out.Stage == pipeline.Ready && len(out.Serving) < want {
		// Every replica has its device, but not every one runs.
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, v1alpha1.ReasonProxyGroupCreating, fmt.Sprintf(messageAvailable, len(out.Serving), want)
	}
	avail := metav1.Condition{Type: v1alpha1.ProxyGroupAvailable, Status: metav1.ConditionFalse,
		Reason: v1alpha1.ReasonProxyGroupCreating, Message: fmt.Sprintf(messageAvailable, len(out.Serving), want)}
	if len(out.Serving) > 0 {
		avail.Status = metav1.ConditionTrue
	}
	if len(out.Serving) == want && want > 0 {
		avail.Reason = v1alpha1.ReasonProxyGroupAvailable
	}
	if out.Stage == pipeline.Invalid && len(out.Serving) == 0 {
		// Refused: nothing is being created, so "Creating, 0/2 pods
		// running" would be untrue.
		avail.Reason, avail.Message = v1alpha1.ReasonProxyGroupInvalid, messageInvalidAvailable
	}
	for _, c := range []metav1.Condition{ready, avail} {
		if old := meta.FindStatusCondition(st.Conditions, c.Type); old != nil && old.Status == c.Status {
			c.LastTransitionTime = old.LastTransitionTime
		} else {
			c.LastTransitionTime = metav1.NewTime(time.Now().Truncate(time.Second))
		}
		meta.SetStatusCondition(&st.Conditions, c)
	}
	return st
}
