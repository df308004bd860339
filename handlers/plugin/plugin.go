package plugin

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/tailplane/tailplane/plugins/host"
	"github.com/tailplane/tailplane/plugins/sdk/abi"
	"github.com/tailplane/tailplane/plugins/source"
	"github.com/tailplane/tailplane/proxy/config"
)

// Condition types and reasons on a RoutingPlugin.
const (
	ConditionAccepted = "Accepted"
	ConditionReady    = "Ready"
	// ConditionDegraded is True while proxies report requests the plugin
	// failed (trap, timeout, no instance free, invalid answer) in their
	// recent window.
	ConditionDegraded = "Degraded"

	ReasonCompiled       = "Compiled"
	ReasonSourceNotFound = "SourceNotFound"
	ReasonSHA256Mismatch = "SHA256Mismatch"
	ReasonInvalidModule  = "InvalidModule"
	ReasonCompileFailed  = "CompileFailed"
	ReasonInvalidSpec    = "InvalidSpec"
	ReasonNotAccepted    = "NotAccepted"
	ReasonNoTargets      = "NoTargets"
	ReasonWaiting        = "WaitingForProxies"
	ReasonLoaded         = "Loaded"
	ReasonLoadFailed     = "LoadFailed"

	// Degraded's reasons, and the reason of the Warning Event posted when
	// the plugin starts failing.
	ReasonRequestsFailing  = "RequestsFailing"
	ReasonNoRecentFailures = "NoRecentFailures"

	// Remote sources (spec.module.oci and spec.module.https).
	ReasonSourceUnreachable  = "SourceUnreachable"
	ReasonPullUnauthorized   = "PullUnauthorized"
	ReasonPullSecretNotFound = "PullSecretNotFound"
	ReasonNotWasm            = "NotWasm"
	ReasonModuleTooLarge     = "ModuleTooLarge"
	ReasonFetchFailed        = "FetchFailed"
)

// ModuleKey is the key of the module (gzip) in the operator's copy: in each
// of its chunk Secrets, whose values concatenated are the gzip stream.
const ModuleKey = "module.wasm.gz"

// Pull policies of spec.module.oci.
const (
	PullIfNotPresent = "IfNotPresent"
	PullAlways       = "Always"
)

// RoutingPlugin is the part of the object the operator reads.
type RoutingPlugin struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              Spec   `json:"spec"`
	Status            Status `json:"status"`
}

// Spec mirrors the CRD's spec.
type Spec struct {
	Module        ModuleSpec          `json:"module"`
	Config        json.RawMessage     `json:"config,omitempty"`
	Order         int                 `json:"order"`
	FailurePolicy string              `json:"failurePolicy,omitempty"`
	Timeout       string              `json:"timeout,omitempty"`
	MemoryLimit   *intstr.IntOrString `json:"memoryLimit,omitempty"`
	PoolSize      int                 `json:"poolSize,omitempty"`
	Capabilities  []string            `json:"capabilities,omitempty"`
	Env           []struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	} `json:"env,omitempty"`
	Targets struct {
		TargetRefs []struct {
			Kind string `json:"kind"`
			Name string `json:"name"`
		} `json:"targetRefs,omitempty"`
		Selectors []struct {
			Kind                 string `json:"kind"`
			metav1.LabelSelector `json:",inline"`
		} `json:"selectors,omitempty"`
	} `json:"targets"`
}

// ModuleSpec mirrors spec.module.
type ModuleSpec struct {
	ConfigMapKeyRef *KeyRef            `json:"configMapKeyRef,omitempty"`
	SecretKeyRef    *KeyRef            `json:"secretKeyRef,omitempty"`
	OCI             *OCISource         `json:"oci,omitempty"`
	HTTPS           *HTTPSSource       `json:"https,omitempty"`
	SHA256          string             `json:"sha256,omitempty"`
	MaxSize         *resource.Quantity `json:"maxSize,omitempty"`
	// SecretChunks is not in the CRD (the API server prunes it): the
	// operator sets it in the proxies' copy of the spec, naming the
	// Secrets that hold the module.
	SecretChunks []string `json:"secretChunks,omitempty"`
}

// OCISource is spec.module.oci.
type OCISource struct {
	Ref             string `json:"ref"`
	PullPolicy      string `json:"pullPolicy,omitempty"`
	ImagePullSecret string `json:"imagePullSecret,omitempty"`
}

// HTTPSSource is spec.module.https.
type HTTPSSource struct {
	URL string `json:"url"`
}

// KeyRef names a key of a ConfigMap or Secret.
type KeyRef struct {
	Name string `json:"name"`
	Key  string `json:"key"`
}

// Status mirrors the CRD's status.
type Status struct {
	ObservedGeneration int64              `json:"observedGeneration,omitempty"`
	Conditions         []metav1.Condition `json:"conditions,omitempty"`
	SHA256             string             `json:"sha256,omitempty"`
	Size               int64              `json:"size,omitempty"`
	// Source is where the serving module came from (for OCI the
	// repository and manifest digest).
	Source string `json:"source,omitempty"`
	// Chunks is how many Secrets hold the operator's copy of the module.
	Chunks   int        `json:"chunks,omitempty"`
	LoadedBy []LoadedBy `json:"loadedBy,omitempty"`
}

// LoadedBy is one proxy running the plugin.
type LoadedBy struct {
	Proxy  string `json:"proxy"`
	SHA256 string `json:"sha256,omitempty"`
	Error  string `json:"error,omitempty"`
	// Failures are the proxy's run-time failures of the module it runs,
	// as it last reported them; nil while none failed.
	Failures *Failures `json:"failures,omitempty"`
}

// Failures mirror proxystate.PluginFailures in the RoutingPlugin's status.
type Failures struct {
	Since          *metav1.Time     `json:"since,omitempty"`
	Requests       int64            `json:"requests"`
	Failed         int64            `json:"failed"`
	ByClass        map[string]int64 `json:"byClass,omitempty"`
	WindowSeconds  int64            `json:"windowSeconds"`
	RecentRequests int64            `json:"recentRequests"`
	RecentFailed   int64            `json:"recentFailed"`
	LastError      string           `json:"lastError,omitempty"`
	LastFailure    *metav1.Time     `json:"lastFailureTime,omitempty"`
}

// Decode reads a RoutingPlugin from an unstructured object.
func Decode(u *unstructured.Unstructured) (*RoutingPlugin, error) {
	rp := &RoutingPlugin{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, rp); err != nil {
		return nil, fmt.Errorf("decode RoutingPlugin %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	return rp, nil
}

// Source is where the module lives.
func (rp *RoutingPlugin) Source() source.Ref {
	ref := source.Ref{Namespace: rp.Namespace, SHA256: rp.Spec.Module.SHA256}
	switch m := rp.Spec.Module; {
	case m.ConfigMapKeyRef != nil:
		ref.Kind, ref.Name, ref.Key = source.ConfigMap, m.ConfigMapKeyRef.Name, m.ConfigMapKeyRef.Key
	case m.SecretKeyRef != nil:
		ref.Kind, ref.Name, ref.Key = source.Secret, m.SecretKeyRef.Name, m.SecretKeyRef.Key
	}
	ref.MaxSize = rp.MaxSize()
	return ref
}

// MaxSize is spec.module.maxSize in bytes (0: the default).
func (rp *RoutingPlugin) MaxSize() int64 {
	if q := rp.Spec.Module.MaxSize; q != nil {
		return q.Value()
	}
	return 0
}

// Remote reports whether the module comes from a registry or a URL.
func (rp *RoutingPlugin) Remote() bool {
	return rp.Spec.Module.OCI != nil || rp.Spec.Module.HTTPS != nil
}

// PullPolicy is spec.module.oci.pullPolicy with Istio's default: Always for
// a reference without a digest whose tag is latest (or absent), else
// IfNotPresent. HTTPS modules are pinned, so IfNotPresent.
func (rp *RoutingPlugin) PullPolicy() string {
	o := rp.Spec.Module.OCI
	if o == nil {
		return PullIfNotPresent
	}
	if o.PullPolicy != "" {
		return o.PullPolicy
	}
	ref := strings.TrimPrefix(o.Ref, "oci://")
	if strings.Contains(ref, "@") {
		return PullIfNotPresent
	}
	last := ref[strings.LastIndex(ref, "/")+1:]
	if _, tag, ok := strings.Cut(last, ":"); !ok || tag == "latest" {
		return PullAlways
	}
	return PullIfNotPresent
}

// SourceString names the module's source as status.source compares it.
func (rp *RoutingPlugin) SourceString() string {
	switch m := rp.Spec.Module; {
	case m.OCI != nil:
		return "oci://" + strings.TrimPrefix(m.OCI.Ref, "oci://")
	case m.HTTPS != nil:
		return m.HTTPS.URL
	}
	return rp.Source().String()
}

// Serving reports whether proxies have a module of the plugin to run: the
// last accepted one, even when the newest spec could not be fetched or
// compiled (the previous module keeps serving).
func (rp *RoutingPlugin) Serving() bool {
	return rp.Status.SHA256 != "" && rp.Status.Chunks > 0
}

// ChunkNames are the Secrets (operator namespace) holding the copy of the
// module with digest sum, in order: content-addressed, so plugins with the
// same module share them and a digest is copied once per cluster.
func ChunkNames(sum string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("tp-wasm-%s-%d", sum, i)
	}
	return out
}

// Accepted reports whether the current generation compiled.
func (rp *RoutingPlugin) Accepted() bool {
	for _, c := range rp.Status.Conditions {
		if c.Type == ConditionAccepted {
			return c.Status == metav1.ConditionTrue && c.ObservedGeneration == rp.Generation && rp.Status.SHA256 != ""
		}
	}
	return false
}

// HostConfig is the plugin as the proxies' host loads it (module included).
func HostConfig(rp *RoutingPlugin, module []byte) (host.Config, error) {
	cfg := host.Config{
		Name: rp.Namespace + "/" + rp.Name, Module: module, SHA256: rp.Spec.Module.SHA256,
		PluginConfig: rp.Spec.Config, FailurePolicy: host.FailurePolicy(rp.Spec.FailurePolicy), PoolSize: rp.Spec.PoolSize,
	}
	for _, c := range rp.Spec.Capabilities {
		cfg.Capabilities = append(cfg.Capabilities, abi.Capability(c))
	}
	if rp.Spec.Timeout != "" {
		d, err := time.ParseDuration(rp.Spec.Timeout)
		if err != nil {
			return cfg, fmt.Errorf("spec.timeout: %w", err)
		}
		cfg.Timeout = d
	}
	if m := rp.Spec.MemoryLimit; m != nil {
		q, err := resource.ParseQuantity(m.String())
		if err != nil {
			return cfg, fmt.Errorf("spec.memoryLimit: %w", err)
		}
		cfg.MemoryLimit = q.Value()
	}
	if len(rp.Spec.Env) > 0 {
		cfg.Env = map[string]string{}
		for _, e := range rp.Spec.Env {
			cfg.Env[e.Name] = e.Value
		}
	}
	return cfg, nil
}

// Targets reports whether the plugin applies to the object of kind
// (Ingress or Service) with the given name and labels, in its namespace.
func Targets(rp *RoutingPlugin, kind, namespace, name string, objLabels map[string]string) bool {
	if namespace != rp.Namespace {
		return false
	}
	for _, r := range rp.Spec.Targets.TargetRefs {
		if r.Kind == kind && r.Name == name {
			return true
		}
	}
	for _, s := range rp.Spec.Targets.Selectors {
		if s.Kind != kind {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(&s.LabelSelector)
		if err == nil && sel.Matches(labels.Set(objLabels)) {
			return true
		}
	}
	return false
}

// CopyName is the name of the per-plugin module copy of earlier versions,
// which the operator deletes (copies are now ChunkNames).
func CopyName(namespace, name string) string {
	sum := sha256.Sum256([]byte(namespace + "/" + name))
	return "tp-plugin-" + hex.EncodeToString(sum[:])[:16]
}

// ProxySpec is the JSON a proxy finds in config.Plugin.Spec: the
// RoutingPlugin's spec (the CRD's shape, defaults applied, so
// plugins.SpecFromRoutingPlugin reads it), with the module pointing at the
// operator's copy in the proxy's own namespace (secretKeyRef and
// secretChunks, gzip), pinned to the digest the operator compiled, and
// without targets or registry details.
type ProxySpec = Spec

// ProxyPlugin is the config entry of a serving plugin for its proxies;
// config.Plugin.Name is "<namespace>/<name>" of the RoutingPlugin.
func ProxyPlugin(rp *RoutingPlugin) (config.Plugin, error) {
	if _, err := HostConfig(rp, nil); err != nil {
		return config.Plugin{}, err
	}
	if !rp.Serving() {
		return config.Plugin{}, fmt.Errorf("plugin %s/%s has no accepted module yet", rp.Namespace, rp.Name)
	}
	spec := rp.Spec
	chunks := ChunkNames(rp.Status.SHA256, rp.Status.Chunks)
	spec.Module = ModuleSpec{
		SecretKeyRef: &KeyRef{Name: chunks[0], Key: ModuleKey}, SecretChunks: chunks,
		SHA256: rp.Status.SHA256, MaxSize: rp.Spec.Module.MaxSize,
	}
	spec.Targets.TargetRefs, spec.Targets.Selectors = nil, nil
	b, err := json.Marshal(spec)
	if err != nil {
		return config.Plugin{}, fmt.Errorf("encode plugin %s/%s: %w", rp.Namespace, rp.Name, err)
	}
	return config.Plugin{Name: rp.Namespace + "/" + rp.Name, Spec: b}, nil
}

// ForProxy returns the config entries and module copies (Secret names) of
// the serving plugins among list that target the object, ordered by
// (order, name). The copies live in the operator namespace, which is the
// proxies' namespace.
func ForProxy(list []*RoutingPlugin, kind, namespace, name string, objLabels map[string]string) ([]config.Plugin, []string) {
	var picked []*RoutingPlugin
	for _, rp := range list {
		if rp.DeletionTimestamp == nil && rp.Serving() && Targets(rp, kind, namespace, name, objLabels) {
			picked = append(picked, rp)
		}
	}
	slices.SortFunc(picked, func(a, b *RoutingPlugin) int {
		if a.Spec.Order != b.Spec.Order {
			return a.Spec.Order - b.Spec.Order
		}
		return compare(a.Name, b.Name)
	})
	var out []config.Plugin
	var secrets []string
	for _, rp := range picked {
		p, err := ProxyPlugin(rp)
		if err != nil {
			continue // not accepted with a bad spec: Accepted says why
		}
		out = append(out, p)
		secrets = append(secrets, ChunkNames(rp.Status.SHA256, rp.Status.Chunks)...)
	}
	return out, secrets
}

func compare(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
