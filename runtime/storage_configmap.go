package runtime

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
)

var configMaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// ConfigMapStorage keeps the records of each handled object in a ConfigMap
// of its own in Namespace (the operator's), so that the runtime never writes
// the objects for its bookkeeping: use it for objects the operator only
// reads, or that users manage with GitOps tools. It needs list, create,
// patch and delete on ConfigMaps in Namespace.
//
// The ConfigMaps are read once when the operator becomes active (it is the
// only writer while it leads) and kept in memory; each cycle that changes
// state writes its object's ConfigMap after the object's own patch. A
// ConfigMap is deleted when its object is gone, has finished its deletion
// or no longer matches any handler, and, at start, when its object was
// deleted while no operator ran.
type ConfigMapStorage struct {
	// Namespace holds the ConfigMaps (required).
	Namespace string
	// Name starts each ConfigMap's name, <Name>-<resource>-<hash>, and is
	// the value of its <Prefix>/storage label (default "runtime-state").
	Name string
	// Prefix of the ConfigMaps' label and annotation (default
	// Settings.Prefix).
	Prefix string
	// Legacy is the prefix of the annotations an earlier version kept the
	// records in (AnnotationStorage), for upgrades: an object that has no
	// ConfigMap yet has its records read from them, and the first cycle
	// that writes the object's ConfigMap removes them in the object's
	// patch. Use Settings.Prefix (which the essence hash ignores), else the
	// removal looks like an update once. Empty: no migration.
	Legacy string
	// Owner, when set, returns the owner every ConfigMap gets (nil: none),
	// so that the garbage collector deletes the state with it: the
	// operator's Deployment, and an uninstall leaves no ConfigMap behind.
	// Start calls it once and gives the owner to ConfigMaps written
	// without it (by an earlier version); an error leaves them as they
	// are and is logged.
	Owner func(context.Context) (*metav1.OwnerReference, error)

	mu      sync.Mutex
	env     StorageEnv             // as given to Start
	owner   *metav1.OwnerReference // what Owner returned at Start
	entries map[Key]*cmEntry
}

// cmEntry is one object's records as last written.
type cmEntry struct {
	uid     types.UID
	rv      string
	records map[string]string // replaced, never modified in place
}

// cmObject names the object of a ConfigMap (its annotation <Prefix>/object).
type cmObject struct {
	Group     string    `json:"group,omitempty"`
	Version   string    `json:"version"`
	Resource  string    `json:"resource"`
	Namespace string    `json:"namespace,omitempty"`
	Name      string    `json:"name"`
	UID       types.UID `json:"uid"`
}

func (s *ConfigMapStorage) defaults(prefix string) error {
	if s.Namespace == "" {
		return errors.New("ConfigMapStorage needs a Namespace")
	}
	if s.Name == "" {
		s.Name = "runtime-state"
	}
	if s.Prefix == "" {
		s.Prefix = prefix
	}
	return nil
}

func (s *ConfigMapStorage) labelKey() string  { return s.Prefix + "/storage" }
func (s *ConfigMapStorage) objectKey() string { return s.Prefix + "/object" }

// name is the ConfigMap of k: readable, and unique through a hash of the
// whole key.
func (s *ConfigMapStorage) name(k Key) string {
	sum := sha256.Sum256([]byte(k.Resource.String() + "|" + k.Namespace + "|" + k.Name))
	return s.Name + "-" + k.Resource.Resource + "-" + hex.EncodeToString(sum[:8])
}

// Start loads every ConfigMap of this storage, then, once the informers
// have synced, removes those whose object no longer exists.
func (s *ConfigMapStorage) Start(ctx context.Context, env StorageEnv) error {
	if err := s.defaults(env.Prefix); err != nil {
		return err
	}
	sel := s.labelKey() + "=" + s.Name
	list, err := env.Dynamic.Resource(configMaps).Namespace(s.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return fmt.Errorf("list state ConfigMaps in %s: %w", s.Namespace, err)
	}
	owner := s.startOwner(ctx, env)
	entries := map[Key]*cmEntry{}
	for _, cm := range list.Items {
		if owner != nil && !ownedBy(&cm, owner.UID) {
			if err := s.giveOwner(ctx, env, &cm, owner); err != nil {
				env.Log.Warn("cannot give a state ConfigMap its owner", "configmap", s.Namespace+"/"+cm.GetName(), "owner", owner.Kind+"/"+owner.Name, "err", err)
			}
		}
		var ref cmObject
		if json.Unmarshal([]byte(cm.GetAnnotations()[s.objectKey()]), &ref) != nil || ref.Name == "" {
			env.Log.Warn("state ConfigMap names no object, ignored", "configmap", s.Namespace+"/"+cm.GetName())
			continue
		}
		data, _, _ := unstructured.NestedStringMap(cm.Object, "data")
		k := Key{Resource: schema.GroupVersionResource{Group: ref.Group, Version: ref.Version, Resource: ref.Resource},
			Namespace: ref.Namespace, Name: ref.Name}
		entries[k] = &cmEntry{uid: ref.UID, rv: cm.GetResourceVersion(), records: data}
	}
	s.mu.Lock()
	s.env, s.entries, s.owner = env, entries, owner
	s.mu.Unlock()
	go s.sweep(ctx)
	return nil
}

// startOwner asks Owner for the ConfigMaps' owner (nil without one or on
// an error, which is logged: the state is kept, only not collected).
func (s *ConfigMapStorage) startOwner(ctx context.Context, env StorageEnv) *metav1.OwnerReference {
	if s.Owner == nil {
		return nil
	}
	owner, err := s.Owner(ctx)
	if err != nil {
		env.Log.Warn("state ConfigMaps get no owner: the garbage collector will not delete them", "err", err)
		return nil
	}
	return owner
}

func ownedBy(obj *unstructured.Unstructured, uid types.UID) bool {
	for _, r := range obj.GetOwnerReferences() {
		if r.UID == uid {
			return true
		}
	}
	return false
}

// giveOwner adds owner to a ConfigMap an earlier version wrote without it
// (a merge patch: the ConfigMaps have no other owner).
func (s *ConfigMapStorage) giveOwner(ctx context.Context, env StorageEnv, cm *unstructured.Unstructured, owner *metav1.OwnerReference) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": cm.GetResourceVersion(), "ownerReferences": []metav1.OwnerReference{*owner}}})
	if err != nil {
		return err
	}
	out, err := env.Dynamic.Resource(configMaps).Namespace(s.Namespace).Patch(ctx, cm.GetName(), types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: env.FieldManager})
	if err != nil {
		return err
	}
	cm.SetResourceVersion(out.GetResourceVersion())
	return nil
}

// sweep deletes the ConfigMaps of objects deleted while no operator ran. It
// waits for the informers, then asks the API server about objects missing
// from the cache (they may be outside every watch's scope).
func (s *ConfigMapStorage) sweep(ctx context.Context) {
	env := s.environ()
	if wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(context.Context) (bool, error) {
		return env.Synced(), nil
	}) != nil {
		return
	}
	s.mu.Lock()
	snapshot := maps.Clone(s.entries)
	s.mu.Unlock()
	for k, e := range snapshot {
		if obj := env.Lookup(k); obj != nil && obj.GetUID() == e.uid {
			continue
		}
		obj, err := env.Dynamic.Resource(k.Resource).Namespace(k.Namespace).Get(ctx, k.Name, metav1.GetOptions{})
		switch {
		case err == nil && obj.GetUID() == e.uid:
			continue
		case err != nil && !apierrors.IsNotFound(err):
			env.Log.Warn("cannot tell whether the object of a state ConfigMap exists", "key", k.String(), "err", err)
			continue
		}
		s.mu.Lock()
		same := s.entries[k] == e
		if same {
			delete(s.entries, k)
		}
		s.mu.Unlock()
		if !same {
			continue // written meanwhile: its object is back
		}
		if err := s.remove(ctx, k, e.rv); err != nil {
			env.Log.Warn("cannot remove a stale state ConfigMap", "key", k.String(), "err", err)
		}
	}
}

func (s *ConfigMapStorage) environ() StorageEnv {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.env
}

// Fetch returns the records of obj's incarnation: those of an earlier
// object of the same name (other UID) do not count.
func (s *ConfigMapStorage) Fetch(k Key, obj *unstructured.Unstructured) map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entries[k]
	if e == nil || e.uid != obj.GetUID() {
		return s.legacy(obj)
	}
	return e.records
}

// legacy returns the records an earlier version kept on obj (see Legacy).
func (s *ConfigMapStorage) legacy(obj *unstructured.Unstructured) map[string]string {
	if s.Legacy == "" {
		return nil
	}
	var out map[string]string
	for k, v := range obj.GetAnnotations() {
		if id, ok := strings.CutPrefix(k, s.Legacy+"/"); ok {
			if out == nil {
				out = map[string]string{}
			}
			out[id] = v
		}
	}
	return out
}

// Patch removes the records an earlier version kept on obj (see Legacy);
// Save moves them into the ConfigMap after this patch.
func (s *ConfigMapStorage) Patch(obj *unstructured.Unstructured, _ map[string]*string) map[string]any {
	old := s.legacy(obj)
	if len(old) == 0 {
		return nil
	}
	ann := make(map[string]any, len(old))
	for id := range old {
		ann[s.Legacy+"/"+id] = nil
	}
	return map[string]any{"metadata": map[string]any{"annotations": ann}}
}

// Save applies changes to obj's records and writes its ConfigMap (deletes
// it when no record is left).
func (s *ConfigMapStorage) Save(ctx context.Context, k Key, obj *unstructured.Unstructured, changes map[string]*string) error {
	s.mu.Lock()
	e := s.entries[k]
	records := map[string]string{}
	moving := false
	if e != nil && e.uid == obj.GetUID() {
		records = maps.Clone(e.records)
	} else if old := s.legacy(obj); len(old) > 0 {
		// Patch removed them from the object: they move here even when
		// nothing changed.
		records, moving = maps.Clone(old), true
	}
	env, owner := s.env, s.owner
	s.mu.Unlock()
	if len(changes) == 0 && !moving {
		return nil
	}
	for id, v := range changes {
		if v == nil {
			delete(records, id)
		} else {
			records[id] = *v
		}
	}
	if len(records) == 0 {
		return s.Purge(ctx, k)
	}
	ref, _ := json.Marshal(cmObject{Group: k.Resource.Group, Version: k.Resource.Version, Resource: k.Resource.Resource,
		Namespace: k.Namespace, Name: k.Name, UID: obj.GetUID()})
	cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}}
	cm.SetNamespace(s.Namespace)
	cm.SetName(s.name(k))
	cm.SetLabels(map[string]string{s.labelKey(): s.Name})
	cm.SetAnnotations(map[string]string{s.objectKey(): string(ref)})
	if owner != nil {
		cm.SetOwnerReferences([]metav1.OwnerReference{*owner})
	}
	data := make(map[string]any, len(records))
	for id, v := range records {
		data[id] = v
	}
	cm.Object["data"] = data
	out, err := Apply(ctx, env.Dynamic, configMaps, cm, env.FieldManager)
	if err != nil {
		return fmt.Errorf("save state of %s: %w", k, err)
	}
	s.mu.Lock()
	if s.entries == nil {
		s.entries = map[Key]*cmEntry{}
	}
	s.entries[k] = &cmEntry{uid: obj.GetUID(), rv: out.GetResourceVersion(), records: records}
	s.mu.Unlock()
	return nil
}

// Purge deletes k's ConfigMap, if it has one.
func (s *ConfigMapStorage) Purge(ctx context.Context, k Key) error {
	s.mu.Lock()
	_, ok := s.entries[k]
	delete(s.entries, k)
	s.mu.Unlock()
	if !ok {
		return nil
	}
	if err := s.remove(ctx, k, ""); err != nil {
		return fmt.Errorf("purge state of %s: %w", k, err)
	}
	return nil
}

// remove deletes k's ConfigMap; with rv, only that version of it.
func (s *ConfigMapStorage) remove(ctx context.Context, k Key, rv string) error {
	opts := metav1.DeleteOptions{}
	if rv != "" {
		opts.Preconditions = &metav1.Preconditions{ResourceVersion: &rv}
	}
	err := s.environ().Dynamic.Resource(configMaps).Namespace(s.Namespace).Delete(ctx, s.name(k), opts)
	if apierrors.IsNotFound(err) || (rv != "" && apierrors.IsConflict(err)) {
		return nil
	}
	return err
}
