package proxyclassrules

import (
	"maps"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/tailplane/tailplane/crds/tailscale/v1alpha1"
	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/internal/proxystate"
)

// ProxyKind is what a proxy does, which decides the parts of a ProxyClass
// that apply to it.
type ProxyKind int

// The proxy kinds.
const (
	// L4 serves a Service (ingress-l4).
	L4 ProxyKind = iota
	// L7 serves an Ingress over HTTPS: the Let's Encrypt staging setting
	// applies.
	L7
	// Egress reaches a tailnet target: metrics and debug do not apply.
	Egress
	// Connector routes tailnet traffic into the cluster's networks (a
	// Connector's replica).
	Connector
)

// LetsEncryptStagingDirectory is the ACME directory used with
// useLetsEncryptStagingEnvironment.
const LetsEncryptStagingDirectory = "https://acme-staging-v02.api.letsencrypt.org/directory"

// Ports of the metrics and debug endpoints, the official ones, and the
// proxy's env var for its metrics listener (cmd/tailplane-proxy).
const (
	MetricsPort  = 9002
	DebugPort    = 9001
	EnvLocalAddr = "TAILPLANE_LOCAL_ADDR"
)

// protectedLabels are the keys a ProxyClass cannot replace: the official
// ones, the proxy's role, by which the pipeline tells the modules'
// proxies apart and DNSConfig finds an egress or Ingress proxy's Pods, and
// the Pods' WireGuard port annotation.
var protectedLabels = []string{
	proxystate.LabelManaged, proxystate.LabelParentType, proxystate.LabelParentName, proxystate.LabelParentNamespace, proxystate.LabelApp,
	proxyset.LabelProxyRole, proxyset.AnnotationListenPort,
}

// merge returns custom plus the protected keys of current: the ProxyClass's
// labels replace the rest, as in the official operator.
func merge(current, custom map[string]string) map[string]string {
	out := maps.Clone(custom)
	if out == nil {
		out = map[string]string{}
	}
	for _, k := range protectedLabels {
		if v, ok := current[k]; ok {
			out[k] = v
		}
	}
	return out
}

// setEnv sets name=value, replacing an earlier entry of the same name (a
// later value wins, and server-side apply refuses duplicate names).
func setEnv(env []corev1.EnvVar, e corev1.EnvVar) []corev1.EnvVar {
	for i := range env {
		if env[i].Name == e.Name {
			env[i] = e
			return env
		}
	}
	return append(env, e)
}

func setPort(ports []corev1.ContainerPort, p corev1.ContainerPort) []corev1.ContainerPort {
	if slices.ContainsFunc(ports, func(q corev1.ContainerPort) bool { return q.Name == p.Name }) {
		return ports
	}
	return append(ports, p)
}

// debugEnabled follows the official default: without an explicit debug
// setting, debug follows metrics.enable.
func debugEnabled(pc *v1alpha1.ProxyClass) bool {
	if s := pc.Spec.StatefulSet; s != nil && s.Pod != nil && s.Pod.TailscaleContainer != nil && s.Pod.TailscaleContainer.Debug != nil {
		return s.Pod.TailscaleContainer.Debug.Enable
	}
	return pc.Spec.Metrics != nil && pc.Spec.Metrics.Enable
}

// Apply returns a copy of a proxy's StatefulSet with pc applied (pc nil
// returns the copy unchanged):
//   - StatefulSet and Pod labels and annotations replaced by the class's,
//     keeping the operator's managed keys;
//   - Pod securityContext, imagePullSecrets, nodeName, nodeSelector,
//     affinity, tolerations, priorityClassName and topologySpreadConstraints
//     replaced wholesale; dnsPolicy and dnsConfig only when set;
//   - the proxy container's image, pull policy, securityContext, resources
//     (when non-empty) and env (a class value wins over the operator's);
//   - metrics (and debug) endpoints, except on egress proxies;
//   - the Let's Encrypt staging directory on L7 proxies.
func Apply(sts *appsv1.StatefulSet, pc *v1alpha1.ProxyClass, kind ProxyKind) *appsv1.StatefulSet {
	out := sts.DeepCopy()
	if pc == nil {
		return out
	}
	main := mainContainer(out)
	if main != nil && kind != Egress {
		if pc.Spec.Metrics != nil && pc.Spec.Metrics.Enable {
			// tailplane-proxy serves /metrics and /healthz on
			// TAILPLANE_LOCAL_ADDR (the official proxy: TS_LOCAL_ADDR_PORT).
			main.Env = setEnv(main.Env, corev1.EnvVar{Name: EnvLocalAddr, Value: "$(POD_IP):9002"})
			main.Ports = setPort(main.Ports, corev1.ContainerPort{Name: "metrics", ContainerPort: MetricsPort, Protocol: corev1.ProtocolTCP})
		}
		if debugEnabled(pc) {
			main.Env = setEnv(main.Env, corev1.EnvVar{Name: "TS_DEBUG_ADDR_PORT", Value: "$(POD_IP):9001"})
			main.Ports = setPort(main.Ports, corev1.ContainerPort{Name: "debug", ContainerPort: DebugPort, Protocol: corev1.ProtocolTCP})
		}
	}
	if main != nil && kind == L7 && pc.Spec.UseLetsEncryptStagingEnvironment {
		main.Env = setEnv(main.Env, corev1.EnvVar{Name: "TS_DEBUG_ACME_DIRECTORY_URL", Value: LetsEncryptStagingDirectory})
	}
	s := pc.Spec.StatefulSet
	if s == nil {
		return out
	}
	if len(s.Labels) > 0 {
		out.Labels = merge(out.Labels, s.Labels.Strings())
	}
	if len(s.Annotations) > 0 {
		out.Annotations = merge(out.Annotations, s.Annotations)
	}
	pod := s.Pod
	if pod == nil {
		return out
	}
	tmpl := &out.Spec.Template
	if len(pod.Labels) > 0 {
		tmpl.Labels = merge(tmpl.Labels, pod.Labels.Strings())
	}
	if len(pod.Annotations) > 0 {
		tmpl.Annotations = merge(tmpl.Annotations, pod.Annotations)
	}
	ps := &tmpl.Spec
	// The proxy's own pod security context (non-root, RuntimeDefault
	// seccomp: the restricted Pod Security Standard) stays unless the
	// ProxyClass sets one.
	if pod.SecurityContext != nil {
		ps.SecurityContext = pod.SecurityContext
	}
	ps.ImagePullSecrets = pod.ImagePullSecrets
	ps.NodeName = pod.NodeName
	ps.NodeSelector = pod.NodeSelector
	ps.Affinity = pod.Affinity
	ps.Tolerations = pod.Tolerations
	ps.PriorityClassName = pod.PriorityClassName
	ps.TopologySpreadConstraints = pod.TopologySpreadConstraints
	if pod.DNSPolicy != nil {
		ps.DNSPolicy = *pod.DNSPolicy
	}
	if pod.DNSConfig != nil {
		ps.DNSConfig = pod.DNSConfig
	}
	if main != nil {
		overlay(main, pod.TailscaleContainer)
	}
	// tailplane-proxy has no init container, so tailscaleInitContainer has
	// nothing to apply to.
	return out
}

func mainContainer(sts *appsv1.StatefulSet) *corev1.Container {
	for i := range sts.Spec.Template.Spec.Containers {
		if sts.Spec.Template.Spec.Containers[i].Name == proxyset.ContainerName {
			return &sts.Spec.Template.Spec.Containers[i]
		}
	}
	return nil
}

func overlay(c *corev1.Container, o *v1alpha1.Container) {
	if o == nil {
		return
	}
	if o.SecurityContext != nil {
		c.SecurityContext = o.SecurityContext
	}
	if len(o.Resources.Requests) > 0 {
		c.Resources.Requests = o.Resources.Requests
	}
	if len(o.Resources.Limits) > 0 {
		c.Resources.Limits = o.Resources.Limits
	}
	for _, e := range o.Env {
		c.Env = setEnv(c.Env, corev1.EnvVar{Name: string(e.Name), Value: e.Value})
		if e.Name == EnvLocalAddr && e.Value != "$(POD_IP):9002" {
			// The readiness probe would ask the wrong address.
			c.ReadinessProbe = nil
		}
	}
	if o.Image != "" {
		c.Image = o.Image
	}
	if o.ImagePullPolicy != "" {
		c.ImagePullPolicy = o.ImagePullPolicy
	}
}
