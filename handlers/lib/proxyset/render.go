package proxyset

import (
	"encoding/json"
	"fmt"
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/tailplane/tailplane/handlers/lib/settings"
	"github.com/tailplane/tailplane/internal/proxystate"
	"github.com/tailplane/tailplane/proxy/config"
)

// Environment variables of the proxy container, as cmd/tailplane-proxy reads
// them: the config Secret's name, the state Secret's name (containerboot's
// TS_KUBE_SECRET), both in POD_NAMESPACE, and the Pod's identity (its
// listeners default to POD_IP).
const (
	EnvConfigSecret = "TAILPLANE_CONFIG_SECRET"
	EnvStateSecret  = "TS_KUBE_SECRET"
	EnvPodNamespace = "POD_NAMESPACE"
	EnvPodIP        = "POD_IP"
	EnvPodName      = "POD_NAME"
	EnvPodUID       = "POD_UID"
	// EnvACMEDirectoryURL and EnvCertFile carry the operator's ACME
	// settings (settings.ACME): tsnet's ACME directory knob, and the file
	// Go's crypto/x509 reads its roots from.
	EnvACMEDirectoryURL = "TS_DEBUG_ACME_DIRECTORY_URL"
	EnvCertFile         = "SSL_CERT_FILE"
)

// ScratchDir is where tailplane-proxy keeps its scratch files (tsnet's
// folder, the plugin compilation cache; its state is in the state Secret):
// an emptyDir, since the root filesystem is read-only. It is the proxy's
// default state folder, and leaves the rest of /tmp to the image.
const ScratchDir = "/tmp/tailplane-proxy"

// scratchVolume is the emptyDir at ScratchDir.
const scratchVolume = "scratch"

// ContainerName is the proxy container's name, the official operator's, so
// that `kubectl logs -c tailscale` keeps working.
const ContainerName = "tailscale"

// HealthPort is where tailplane-proxy serves /healthz (and /metrics) on the
// Pod's IP: its readiness probe. A ProxyClass that moves the listener
// (TAILPLANE_LOCAL_ADDR) drops the probe.
const HealthPort = 9002

// Secret types, the values of proxystate.LabelSecretType.
const (
	SecretTypeConfig = "config"
	SecretTypeState  = "state"
)

// Parent identifies the object a proxy serves, and the module whose proxy it
// is: one object can have a proxy of each role (a Service switching from
// expose to egress has both for a moment).
type Parent struct {
	// Type is the official parent type label (ParentService, ...).
	Type string
	// Namespace, Name and UID of the parent.
	Namespace, Name string
	UID             types.UID
	// Role is the owning module's role (LabelProxyRole on every object).
	Role string
	// NameKey replaces Type in the proxy's object names when two modules
	// share a Type, so that their proxies' objects never share names (""
	// means Type).
	NameKey string
}

// Key identifies a parent's proxy among all proxies: the owning module's
// role, and the parent's namespace and name. It is what a proxy's labels say
// of its parent (the name label may be truncated: TruncateLabelValue); the
// rest of Parent comes from the module.
type Key struct {
	Role, Namespace, Name string
}

// Key is the key of the parent's proxy.
func (p Parent) Key() Key { return Key{Role: p.Role, Namespace: p.Namespace, Name: p.Name} }

// Names returns the names of replica 0 of the parent's proxy; Replica
// gives the others.
func (p Parent) Names() Names {
	return Names{Base: baseName(p)}.Replica(0)
}

// Labels are the labels on every object of the parent's proxy: the
// official parent labels and the role.
func (p Parent) Labels() map[string]string {
	l := p.OfficialLabels()
	l[LabelProxyRole] = p.Role
	return l
}

// LabelProxyRole is put on every object of a proxy (in the operator
// namespace): the role of the module that owns it. The state Secrets carry
// it too, and the parent has a proxy of that role for as long as one
// exists: it replaces a mark on the parent, which users' GitOps tools would
// report as drift. State Secrets are applied first and deleted last, so they
// cover every other object of the proxy.
const LabelProxyRole = "tailplane.dev/proxy-role"

// AnnotationListenPort is on the Pod template of a proxy whose replicas
// use a fixed WireGuard port (ProxyGroup static endpoints): the port. tsnet
// binds it when it starts, so a change of it restarts the replicas.
const AnnotationListenPort = "tailplane.dev/listen-port"

// Spec is everything needed to render one proxy.
type Spec struct {
	Parent Parent
	// Namespace is the operator namespace, where the objects live.
	Namespace string
	// Image is the tailplane-proxy image.
	Image string
	// Configs are the proxy configs of the replicas, one per replica, in
	// ordinal order; their number is the StatefulSet's replicas (none:
	// the proxy is scaled to zero).
	Configs []*config.Config
	// ExtraSecrets are further Secrets in the operator namespace the proxy
	// may read (an Ingress's TLS certificate copy); the Role names them.
	ExtraSecrets []string
	// ACME is the operator's ACME server for every proxy (settings
	// ProxyACME), rendered as the container's env. A ProxyClass's env is
	// applied later and wins.
	ACME settings.ACME
}

// Replica is what belongs to one replica of a proxy.
type Replica struct {
	Names        Names
	ConfigSecret *corev1.Secret
	// StateSecret carries only labels: its data belongs to the proxy, and
	// applying it without data never takes fields the proxy wrote.
	StateSecret *corev1.Secret
}

// Objects are the desired objects of one proxy, ready for server-side
// apply (TypeMeta set, no status).
type Objects struct {
	// Names are replica 0's names; Names.Base names the shared objects.
	Names          Names
	ServiceAccount *corev1.ServiceAccount
	Role           *rbacv1.Role
	RoleBinding    *rbacv1.RoleBinding
	Replicas       []Replica
	StatefulSet    *appsv1.StatefulSet
}

// List returns the objects in the order they should be applied: the state
// Secrets first (see LabelProxyRole), identity and configs, then the
// StatefulSet that uses them.
func (o *Objects) List() []any {
	var out []any
	for _, r := range o.Replicas {
		out = append(out, r.StateSecret)
	}
	out = append(out, o.ServiceAccount, o.Role, o.RoleBinding)
	for _, r := range o.Replicas {
		out = append(out, r.ConfigSecret)
	}
	return append(out, o.StatefulSet)
}

// Render returns the objects of the proxy described by spec. Each config is
// validated first (config.Config.Validate), so a proxy is never given a
// config it would refuse.
func Render(spec Spec) (*Objects, error) {
	if spec.Namespace == "" || spec.Image == "" {
		return nil, fmt.Errorf("proxyset: operator namespace and proxy image are required")
	}
	p := spec.Parent
	names := p.Names()
	labels := p.Labels()
	meta := func(name string, extra map[string]string) metav1.ObjectMeta {
		l := maps.Clone(labels)
		maps.Copy(l, extra)
		return metav1.ObjectMeta{Name: name, Namespace: spec.Namespace, Labels: l}
	}
	o := &Objects{Names: names}
	var readable []string
	for i, c := range spec.Configs {
		if c == nil {
			return nil, fmt.Errorf("proxyset: no proxy config for replica %d", i)
		}
		if err := c.Validate(); err != nil {
			return nil, fmt.Errorf("proxyset: proxy config for %s/%s (replica %d): %w", p.Namespace, p.Name, i, err)
		}
		cfg, err := json.MarshalIndent(c, "", "  ")
		if err != nil {
			return nil, fmt.Errorf("proxyset: encode proxy config: %w", err)
		}
		rn := names.Replica(i)
		readable = append(readable, rn.ConfigSecret, rn.StateSecret)
		o.Replicas = append(o.Replicas, Replica{
			Names: rn,
			ConfigSecret: &corev1.Secret{
				TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
				ObjectMeta: meta(rn.ConfigSecret, map[string]string{proxystate.LabelSecretType: SecretTypeConfig}),
				Type:       corev1.SecretTypeOpaque,
				Data:       map[string][]byte{config.SecretKey: cfg},
			},
			StateSecret: &corev1.Secret{
				TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
				ObjectMeta: meta(rn.StateSecret, map[string]string{proxystate.LabelSecretType: SecretTypeState}),
				Type:       corev1.SecretTypeOpaque,
			},
		})
	}
	o.ServiceAccount = &corev1.ServiceAccount{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
		ObjectMeta: meta(names.Base, nil),
	}
	o.Role = &rbacv1.Role{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
		ObjectMeta: meta(names.Base, nil),
	}
	if names := append(readable, spec.ExtraSecrets...); len(names) > 0 {
		// Only the replicas' Secrets: read and watch the config, keep
		// the state. list and watch are allowed by name because a watch
		// with fieldSelector metadata.name is authorized against
		// resourceNames. With no replica there is no rule at all: a rule
		// without resourceNames would cover every Secret.
		o.Role.Rules = []rbacv1.PolicyRule{{
			APIGroups:     []string{""},
			Resources:     []string{"secrets"},
			ResourceNames: names,
			Verbs:         []string{"get", "list", "watch", "patch", "update"},
		}}
	}
	o.RoleBinding = &rbacv1.RoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
		ObjectMeta: meta(names.Base, nil),
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: names.Base},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: names.Base, Namespace: spec.Namespace}},
	}
	o.StatefulSet = statefulSet(spec, names, labels, int32(len(spec.Configs)))
	return o, nil
}

func statefulSet(spec Spec, names Names, labels map[string]string, replicas int32) *appsv1.StatefulSet {
	selector := map[string]string{proxystate.LabelApp: string(spec.Parent.UID)}
	podLabels := maps.Clone(labels)
	maps.Copy(podLabels, selector)
	fieldEnv := func(name, path string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
	}
	noEscalation, readOnlyRoot := false, true
	return &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: metav1.ObjectMeta{Name: names.Base, Namespace: spec.Namespace, Labels: maps.Clone(labels)},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    &replicas,
			ServiceName: names.Base,
			Selector:    &metav1.LabelSelector{MatchLabels: selector},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
				Spec: corev1.PodSpec{
					ServiceAccountName:            names.Base,
					TerminationGracePeriodSeconds: new(int64(30)),
					// With the container's context below, the restricted
					// Pod Security Standard: the image's user is 65532.
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot:   new(true),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					Containers: []corev1.Container{{
						Name:            ContainerName,
						Image:           spec.Image,
						ImagePullPolicy: corev1.PullIfNotPresent,
						Env: append([]corev1.EnvVar{
							fieldEnv(EnvPodIP, "status.podIP"),
							fieldEnv(EnvPodName, "metadata.name"),
							fieldEnv(EnvPodUID, "metadata.uid"),
							fieldEnv(EnvPodNamespace, "metadata.namespace"),
							// Each replica reads its own Secrets, named
							// after its Pod (Names.Replica).
							{Name: EnvConfigSecret, Value: "$(" + EnvPodName + ")-config"},
							{Name: EnvStateSecret, Value: "$(" + EnvPodName + ")"},
						}, acmeEnv(spec.ACME)...),
						// Userspace networking (tsnet): no privileges, no
						// capabilities, no init container, and nothing
						// written outside ScratchDir.
						SecurityContext: &corev1.SecurityContext{
							AllowPrivilegeEscalation: &noEscalation,
							Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
							ReadOnlyRootFilesystem:   &readOnlyRoot,
						},
						VolumeMounts: []corev1.VolumeMount{{Name: scratchVolume, MountPath: ScratchDir}},
						// Ready once logged in with a config applied and,
						// hosting Tailscale Services, once control routes
						// them to this replica: a rolling restart then
						// waits for it before stopping the next one.
						ReadinessProbe: &corev1.Probe{
							ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
								Path: "/healthz", Port: intstr.FromInt32(HealthPort)}},
							PeriodSeconds: 1, TimeoutSeconds: 2, FailureThreshold: 3,
						},
					}},
					Volumes: []corev1.Volume{{Name: scratchVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
				},
			},
		},
	}
}

// acmeEnv is the env that points a proxy at the operator's ACME server.
func acmeEnv(a settings.ACME) []corev1.EnvVar {
	var env []corev1.EnvVar
	if a.DirectoryURL != "" {
		env = append(env, corev1.EnvVar{Name: EnvACMEDirectoryURL, Value: a.DirectoryURL})
	}
	if a.CAFile != "" {
		env = append(env, corev1.EnvVar{Name: EnvCertFile, Value: a.CAFile})
	}
	return env
}
