package proxyclassrules

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	dockerref "github.com/distribution/reference"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/tailplane/tailplane/crds/tailscale/v1alpha1"
)

// Event reasons and messages, the official ones.
const (
	ReasonCustomTSEnvVar      = "CustomTSEnvVar"
	ReasonProxyClassInvalid   = "ProxyClassInvalid"
	messageCustomTSEnvVar     = "ProxyClass overrides the default value for %s env var for %s container. Running with custom values for Tailscale env vars is not recommended and might break in the future."
	messageProxyClassInvalid  = "ProxyClass is not valid: %v"
	serviceMonitorCRDName     = "servicemonitors.monitoring.coreos.com"
	tailscaleContainerForWarn = "tailscale"
)

// Validate checks what the CRD schema cannot. serviceMonitorCRD says whether
// the Prometheus Operator's ServiceMonitor CRD is installed (a ServiceMonitor
// can only be requested when it is). It returns every violation.
func Validate(pc *v1alpha1.ProxyClass, serviceMonitorCRD bool) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	if sts := pc.Spec.StatefulSet; sts != nil {
		p := spec.Child("statefulSet")
		errs = append(errs, metavalidation.ValidateLabels(sts.Labels.Strings(), p.Child("labels"))...)
		errs = append(errs, apivalidation.ValidateAnnotations(sts.Annotations, p.Child("annotations"))...)
		if pod := sts.Pod; pod != nil {
			pp := p.Child("pod")
			errs = append(errs, metavalidation.ValidateLabels(pod.Labels.Strings(), pp.Child("labels"))...)
			errs = append(errs, apivalidation.ValidateAnnotations(pod.Annotations, pp.Child("annotations"))...)
			errs = append(errs, validateContainer(pod.TailscaleContainer, pp.Child("tailscaleContainer"))...)
			errs = append(errs, validateContainer(pod.TailscaleInitContainer, pp.Child("tailscaleInitContainer"))...)
			if c := pod.TailscaleInitContainer; c != nil && c.Debug != nil {
				errs = append(errs, field.Invalid(pp.Child("tailscaleInitContainer", "debug"), c.Debug, "debug settings cannot be configured on the init container"))
			}
		}
	}
	if m := pc.Spec.Metrics; m != nil && m.ServiceMonitor != nil {
		p := spec.Child("metrics", "serviceMonitor")
		if m.ServiceMonitor.Enable && !serviceMonitorCRD {
			errs = append(errs, field.Invalid(p, "enable",
				fmt.Sprintf("ProxyClass defines that a ServiceMonitor custom resource should be created, but %q CRD was not found", serviceMonitorCRDName)))
		}
		errs = append(errs, metavalidation.ValidateLabels(m.ServiceMonitor.Labels.Strings(), p.Child("labels"))...)
	}
	if se := pc.Spec.StaticEndpoints; se != nil && se.NodePort != nil {
		errs = append(errs, validatePortRanges(se.NodePort.Ports, spec.Child("staticEndpoints", "nodePort", "ports"))...)
	}
	return errs
}

func validateContainer(c *v1alpha1.Container, p *field.Path) field.ErrorList {
	if c == nil {
		return nil
	}
	errs := validateResources(c.Resources, p.Child("resources"))
	if c.Image == "" {
		return errs
	}
	// The kubelet's rule for image references.
	if _, err := dockerref.ParseNormalizedNamed(c.Image); err != nil {
		errs = append(errs, field.Invalid(p.Child("image"), c.Image, err.Error()))
	}
	return errs
}

// validateResources applies the API server's rules for container resources
// (a StatefulSet breaking them is refused on every apply): quantities are
// not negative, and a request is not above its limit.
func validateResources(r corev1.ResourceRequirements, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, list := range []struct {
		name string
		q    corev1.ResourceList
	}{{"limits", r.Limits}, {"requests", r.Requests}} {
		for _, name := range slices.Sorted(maps.Keys(list.q)) {
			if q := list.q[name]; q.Sign() < 0 {
				errs = append(errs, field.Invalid(p.Child(list.name).Key(string(name)), q.String(), "must be greater than or equal to 0"))
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(r.Requests)) {
		req := r.Requests[name]
		if limit, ok := r.Limits[name]; ok && req.Cmp(limit) > 0 {
			errs = append(errs, field.Invalid(p.Child("requests").Key(string(name)), req.String(),
				fmt.Sprintf("must be less than or equal to %s limit of %s", name, limit.String())))
		}
	}
	return errs
}

// validatePortRanges checks each range (port set, endPort not below it) and
// that no two ranges overlap. Whether they lie in the cluster's NodePort
// range and clash with other ProxyClasses needs the cluster: the handler
// checks that.
func validatePortRanges(ranges []v1alpha1.PortRange, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, r := range ranges {
		if r.Port == 0 {
			errs = append(errs, field.Invalid(p.Index(i).Child("port"), r.Port, "port must be set"))
		}
		if r.EndPort != 0 && r.EndPort < r.Port {
			errs = append(errs, field.Invalid(p.Index(i).Child("endPort"), r.EndPort, fmt.Sprintf("endPort must not be below port %d", r.Port)))
		}
		for j := range i {
			if overlap(ranges[j], r) {
				errs = append(errs, field.Invalid(p.Index(i), fmt.Sprintf("%d-%d", r.Port, end(r)), fmt.Sprintf("overlaps ports[%d]", j)))
			}
		}
	}
	return errs
}

func end(r v1alpha1.PortRange) uint16 {
	if r.EndPort == 0 {
		return r.Port
	}
	return r.EndPort
}

func overlap(a, b v1alpha1.PortRange) bool { return a.Port <= end(b) && b.Port <= end(a) }

// EnvWarnings returns the CustomTSEnvVar Event messages for env vars of the
// proxy container that override Tailscale's own settings.
func EnvWarnings(pc *v1alpha1.ProxyClass) []string {
	sts := pc.Spec.StatefulSet
	if sts == nil || sts.Pod == nil || sts.Pod.TailscaleContainer == nil {
		return nil
	}
	var out []string
	for _, e := range sts.Pod.TailscaleContainer.Env {
		name := string(e.Name)
		if strings.HasPrefix(name, "TS_") || strings.EqualFold(name, "EXPERIMENTAL_TS_CONFIGFILE_PATH") ||
			strings.EqualFold(name, "EXPERIMENTAL_ALLOW_PROXYING_CLUSTER_TRAFFIC_VIA_INGRESS") {
			out = append(out, fmt.Sprintf(messageCustomTSEnvVar, name, tailscaleContainerForWarn))
		}
	}
	return out
}

// Condition returns the ProxyClassReady condition for the outcome of
// Validate: True/ProxyClassValid, or False/ProxyClassInvalid with the
// official message.
func Condition(pc *v1alpha1.ProxyClass, errs field.ErrorList, now time.Time) metav1.Condition {
	c := metav1.Condition{
		Type: v1alpha1.ProxyClassReady, Status: metav1.ConditionTrue,
		Reason: v1alpha1.ReasonProxyClassValid, Message: v1alpha1.ReasonProxyClassValid,
		ObservedGeneration: pc.Generation, LastTransitionTime: metav1.NewTime(now),
	}
	if len(errs) > 0 {
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, v1alpha1.ReasonProxyClassInvalid, fmt.Sprintf(messageProxyClassInvalid, errs.ToAggregate())
	}
	return c
}

// Ready reports whether pc may be used: ProxyClassReady is True for its
// current generation.
func Ready(pc *v1alpha1.ProxyClass) bool {
	c := meta.FindStatusCondition(pc.Status.Conditions, v1alpha1.ProxyClassReady)
	return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == pc.Generation
}

// Decided reports whether pc's ProxyClassReady condition was set for its
// current generation, Ready or not.
func Decided(pc *v1alpha1.ProxyClass) bool {
	c := meta.FindStatusCondition(pc.Status.Conditions, v1alpha1.ProxyClassReady)
	return c != nil && c.ObservedGeneration == pc.Generation
}

// NotReadyMessage is the ProxyPending message for a parent whose ProxyClass
// is missing (pc nil) or not Ready.
func NotReadyMessage(name string, pc *v1alpha1.ProxyClass) string {
	if pc == nil {
		return fmt.Sprintf("the ProxyClass %q does not exist; waiting for it to be created and Ready", name)
	}
	msg := fmt.Sprintf("the ProxyClass %q is not yet in a ready state, waiting...", name)
	// Why, as the class says it (nothing when it was not validated yet).
	if c := meta.FindStatusCondition(pc.Status.Conditions, v1alpha1.ProxyClassReady); c != nil && c.Status != metav1.ConditionTrue && c.ObservedGeneration == pc.Generation {
		msg += fmt.Sprintf(" (%s: %s)", c.Reason, c.Message)
	}
	return msg
}
