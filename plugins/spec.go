package plugins

import (
	"encoding/json"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/tailplane/tailplane/plugins/host"
	"github.com/tailplane/tailplane/plugins/sdk/abi"
	"github.com/tailplane/tailplane/plugins/source"
)

// routingPluginSpec mirrors RoutingPlugin's spec (crds/tailplane.dev_routingplugins.yaml).
type routingPluginSpec struct {
	Module struct {
		ConfigMapKeyRef *keyRef `json:"configMapKeyRef"`
		SecretKeyRef    *keyRef `json:"secretKeyRef"`
		// SecretChunks is set by the operator only: the Secrets (in
		// order) of its content-addressed copy; secretKeyRef names the
		// first and the key.
		SecretChunks []string           `json:"secretChunks"`
		OCI          json.RawMessage    `json:"oci"`
		HTTPS        json.RawMessage    `json:"https"`
		SHA256       string             `json:"sha256"`
		MaxSize      *resource.Quantity `json:"maxSize"`
	} `json:"module"`
	Config        json.RawMessage                `json:"config"`
	Order         int                            `json:"order"`
	FailurePolicy string                         `json:"failurePolicy"`
	Timeout       string                         `json:"timeout"`
	MemoryLimit   resource.Quantity              `json:"memoryLimit"`
	PoolSize      int                            `json:"poolSize"`
	Capabilities  []abi.Capability               `json:"capabilities"`
	Env           []struct{ Name, Value string } `json:"env"`
}

type keyRef struct {
	Name string `json:"name"`
	Key  string `json:"key"`
}

// SpecFromRoutingPlugin turns a RoutingPlugin object (as the apiserver
// returns it, defaults applied) into the Spec a proxy passes to Apply. The
// module is fetched later, by Apply, from the ConfigMap or Secret in the
// RoutingPlugin's namespace. The plugin is named <namespace>/<name>.
func SpecFromRoutingPlugin(obj *unstructured.Unstructured) (Spec, error) {
	id := obj.GetNamespace() + "/" + obj.GetName()
	raw, err := json.Marshal(obj.Object["spec"])
	if err != nil {
		return Spec{}, fmt.Errorf("RoutingPlugin %s: %w", id, err)
	}
	var rp routingPluginSpec
	if err := json.Unmarshal(raw, &rp); err != nil {
		return Spec{}, fmt.Errorf("RoutingPlugin %s: spec: %w", id, err)
	}
	ref := &source.Ref{Namespace: obj.GetNamespace(), SHA256: rp.Module.SHA256}
	if rp.Module.MaxSize != nil {
		ref.MaxSize = rp.Module.MaxSize.Value()
	}
	switch {
	case len(rp.Module.OCI) > 0 || len(rp.Module.HTTPS) > 0:
		// Proxies never hold registry credentials: the operator fetches
		// and hands them a copy (secretKeyRef and secretChunks).
		return Spec{}, fmt.Errorf("RoutingPlugin %s: spec.module.oci and spec.module.https are fetched by the operator; a proxy reads only the operator's copy", id)
	case rp.Module.SecretKeyRef != nil && len(rp.Module.SecretChunks) > 0 && rp.Module.ConfigMapKeyRef == nil:
		ref.Kind, ref.Name, ref.Key, ref.Chunks = source.Secret, rp.Module.SecretChunks[0], rp.Module.SecretKeyRef.Key, rp.Module.SecretChunks
	case rp.Module.ConfigMapKeyRef != nil && rp.Module.SecretKeyRef == nil:
		ref.Kind, ref.Name, ref.Key = source.ConfigMap, rp.Module.ConfigMapKeyRef.Name, rp.Module.ConfigMapKeyRef.Key
	case rp.Module.SecretKeyRef != nil && rp.Module.ConfigMapKeyRef == nil:
		ref.Kind, ref.Name, ref.Key = source.Secret, rp.Module.SecretKeyRef.Name, rp.Module.SecretKeyRef.Key
	default:
		return Spec{}, fmt.Errorf("RoutingPlugin %s: spec.module needs exactly one of configMapKeyRef and secretKeyRef", id)
	}
	s := Spec{Source: ref, Order: rp.Order, Config: host.Config{
		Name: id, SHA256: rp.Module.SHA256, PluginConfig: rp.Config, Capabilities: rp.Capabilities,
		FailurePolicy: host.FailurePolicy(rp.FailurePolicy), PoolSize: rp.PoolSize, MemoryLimit: rp.MemoryLimit.Value(),
	}}
	if len(s.PluginConfig) == 0 || string(s.PluginConfig) == "null" {
		s.PluginConfig = []byte("{}")
	}
	if rp.Timeout != "" {
		d, err := time.ParseDuration(rp.Timeout)
		if err != nil || d <= 0 {
			return Spec{}, fmt.Errorf("RoutingPlugin %s: spec.timeout %q is not a positive duration", id, rp.Timeout)
		}
		s.Timeout = d
	}
	if len(rp.Env) > 0 {
		s.Env = map[string]string{}
		for _, e := range rp.Env {
			s.Env[e.Name] = e.Value
		}
	}
	return s, nil
}
