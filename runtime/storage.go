package runtime

import (
	"context"
	"fmt"
	"strings"

	"github.com/charmbracelet/log"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// Storage keeps the runtime's state of each handled object: the
// last-handled record (id "last-handled") and the progress of each handler
// (id = handler id), as small JSON strings. It is chosen per resource (the
// Store option, else Settings.Storage): AnnotationStorage keeps the records
// on the object itself, the right place for an operator's own custom
// resources; ConfigMapStorage keeps them in the operator's namespace, for
// objects the operator must not (RBAC) or should not (GitOps drift) write.
//
// The runtime calls Fetch on every cycle, so it must be served from memory
// or from the object. A cycle's changes go through Patch (merged into the
// cycle's one patch of the object) and then, once that patch is written,
// Save; a storage uses one of the two. Purge forgets an object that is gone,
// finished its deletion, or no longer matches any handler.
type Storage interface {
	// Start runs before any watch, each time the operator becomes active:
	// storage outside the objects loads what it kept here.
	Start(ctx context.Context, env StorageEnv) error
	// Fetch returns the records kept for obj (nil or empty: none).
	Fetch(k Key, obj *unstructured.Unstructured) map[string]string
	// Patch returns what to merge into the cycle's patch of obj for changes
	// (a nil value removes a record); nil when the records live elsewhere.
	Patch(obj *unstructured.Unstructured, changes map[string]*string) map[string]any
	// Save writes changes that do not live on the object; it runs after
	// the object's own patch succeeded.
	Save(ctx context.Context, k Key, obj *unstructured.Unstructured, changes map[string]*string) error
	// Purge removes every record kept for k outside the object.
	Purge(ctx context.Context, k Key) error
}

// StorageEnv is what a Storage gets at Start.
type StorageEnv struct {
	// Dynamic is the Operator's client.
	Dynamic dynamic.Interface
	// FieldManager and Prefix are Settings.FieldManager and Settings.Prefix.
	FieldManager, Prefix string
	// Lookup returns an object from the informers' cache (nil: not cached).
	Lookup func(Key) *unstructured.Unstructured
	// Synced reports whether every informer has synced.
	Synced func() bool
	// Log is the Operator's logger.
	Log *log.Logger
}

// Store keeps the state of the handler's resource in s instead of
// Settings.Storage. Every handler of a resource that sets it must name the
// same storage.
func Store(s Storage) Option { return func(h *handler) { h.storage = s } }

// AnnotationStorage keeps each record in an annotation of the object,
// <Prefix>/<id>, written with the cycle's patch (Kopf's default). It needs
// no other object and no other permission than patching the object.
type AnnotationStorage struct {
	// Prefix of the annotation keys (default Settings.Prefix).
	Prefix string
}

// Start does nothing: the records travel with the objects.
func (a *AnnotationStorage) Start(context.Context, StorageEnv) error { return nil }

// Fetch reads the annotations under the prefix.
func (a *AnnotationStorage) Fetch(_ Key, obj *unstructured.Unstructured) map[string]string {
	var out map[string]string
	for k, v := range obj.GetAnnotations() {
		if id, ok := strings.CutPrefix(k, a.Prefix+"/"); ok {
			if out == nil {
				out = map[string]string{}
			}
			out[id] = v
		}
	}
	return out
}

// Patch turns the changes into annotation changes.
func (a *AnnotationStorage) Patch(obj *unstructured.Unstructured, changes map[string]*string) map[string]any {
	ann := map[string]any{}
	for id, v := range changes {
		k := a.Prefix + "/" + id
		if v == nil {
			if _, ok := obj.GetAnnotations()[k]; ok {
				ann[k] = nil
			}
			continue
		}
		ann[k] = *v
	}
	if len(ann) == 0 {
		return nil
	}
	return map[string]any{"metadata": map[string]any{"annotations": ann}}
}

// Save does nothing: Patch carried the changes.
func (a *AnnotationStorage) Save(context.Context, Key, *unstructured.Unstructured, map[string]*string) error {
	return nil
}

// Purge does nothing: the records go with the object.
func (a *AnnotationStorage) Purge(context.Context, Key) error { return nil }

// storageFor returns the storage of a resource's objects.
func (o *Operator) storageFor(k Key) Storage {
	o.mu.Lock()
	defer o.mu.Unlock()
	if s, ok := o.storages[k.Resource]; ok {
		return s
	}
	return o.settings.Storage
}

// bindStorage records a handler's Store option for its resource (o.mu
// held); a storage is started once, before any watch.
func (o *Operator) bindStorage(h *handler) error {
	s := h.storage
	if s == nil {
		return nil
	}
	if o.storages == nil {
		o.storages = map[schema.GroupVersionResource]Storage{}
	}
	if cur, ok := o.storages[h.gvr]; ok && cur != s {
		return fmt.Errorf("resource %s already has another Store", h.gvr.Resource)
	}
	if _, ok := o.storages[h.gvr]; ok {
		return nil
	}
	o.storages[h.gvr] = s
	o.startStorage(s)
	return nil
}

// startStorage adds s's Start to the startup hooks unless it is there
// already (o.mu held).
func (o *Operator) startStorage(s Storage) {
	for _, started := range o.storageStarts {
		if started == s {
			return
		}
	}
	o.storageStarts = append(o.storageStarts, s)
	o.startup = append(o.startup, func(ctx context.Context) error {
		env := StorageEnv{
			Dynamic: o.dyn, FieldManager: o.settings.FieldManager, Prefix: o.settings.Prefix, Log: o.log,
			Lookup: o.lookup, Synced: o.synced.Load,
		}
		if err := s.Start(ctx, env); err != nil {
			return fmt.Errorf("start storage: %w", err)
		}
		return nil
	})
}
