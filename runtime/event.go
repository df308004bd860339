package runtime

import (
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/charmbracelet/log"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Cause says why a handler runs.
type Cause int

// The causes a handler can see.
const (
	CauseCreate Cause = iota + 1
	CauseUpdate
	CauseDelete
	CauseResume
	CauseField
	CauseTimer
	CauseDaemon
	// CauseEnqueue: the object was queued again by Operator.Enqueue or a
	// Watch mapping, without a change of its own.
	CauseEnqueue
)

func (c Cause) String() string {
	switch c {
	case CauseCreate:
		return "create"
	case CauseUpdate:
		return "update"
	case CauseDelete:
		return "delete"
	case CauseResume:
		return "resume"
	case CauseField:
		return "field"
	case CauseTimer:
		return "timer"
	case CauseDaemon:
		return "daemon"
	case CauseEnqueue:
		return "enqueue"
	}
	return fmt.Sprintf("cause(%d)", int(c))
}

// Event is what a handler receives.
type Event struct {
	// Cause is why the handler runs.
	Cause Cause
	// HandlerID is the id the handler was registered with.
	HandlerID string
	// Resource is the object's resource.
	Resource schema.GroupVersionResource
	// Object is a private copy of the object as cached when the cycle began.
	Object *unstructured.Unstructured
	// Old and New are, for an OnField handler, the previous and current
	// values of its field (Old is nil when the field is new). For the
	// update and resume causes of a handler registered WithDiff they are
	// the last handled and the current essence of the object
	// (map[string]any of everything but status and system metadata, see
	// MaxEssence); Old is nil when the record holds no essence. Other
	// handlers and the create, delete and enqueue causes get both nil.
	Old, New any
	// Diff lists what changed from Old to New for the update and resume
	// causes of a handler registered WithDiff (for OnField, only at or
	// below its field); nil when Old is unknown or without WithDiff. A
	// resume after a restart compares with the essence stored before it,
	// so it is empty unless the object changed meanwhile.
	Diff []DiffItem
	// Retry counts the earlier attempts of this handler for this cause.
	Retry int
	// Started is when the first attempt began.
	Started time.Time
	// Log is the object's logger: every line carries its key.
	Log *log.Logger
	// Patch collects changes to the object that are merged into the
	// cycle's single patch (a JSON merge patch).
	Patch *Patch

	op  *Operator
	key Key
}

// Index returns the index registered under name, or nil.
func (e *Event) Index(name string) *Index { return e.op.GetIndex(name) }

// Latest returns the object as currently cached (nil once it is gone); daemons
// use it to see changes made after they started.
func (e *Event) Latest() *unstructured.Unstructured {
	return e.op.lookup(e.key) // a copy of its own, decoded from the cache
}

// Patch is a JSON merge patch that handlers add to. A nil value deletes.
type Patch struct {
	mu  sync.Mutex
	obj map[string]any
}

// Set sets the value at the field path, e.g. Set("v", "spec", "x").
func (p *Patch) Set(value any, path ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.obj == nil {
		p.obj = map[string]any{}
	}
	m := p.obj
	for _, f := range path[:len(path)-1] {
		next, ok := m[f].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[f] = next
		}
		m = next
	}
	m[path[len(path)-1]] = value
}

// SetAnnotation sets an annotation; RemoveAnnotation deletes one.
func (p *Patch) SetAnnotation(key, value string) { p.Set(value, "metadata", "annotations", key) }

// RemoveAnnotation deletes an annotation.
func (p *Patch) RemoveAnnotation(key string) { p.Set(nil, "metadata", "annotations", key) }

// SetLabel sets a label.
func (p *Patch) SetLabel(key, value string) { p.Set(value, "metadata", "labels", key) }

func (p *Patch) empty() bool { p.mu.Lock(); defer p.mu.Unlock(); return len(p.obj) == 0 }

// Index is an in-memory index: index key -> object key -> value.
type Index struct {
	mu      sync.RWMutex
	entries map[string]map[string]any
	byObj   map[string][]string
}

func newIndex() *Index {
	return &Index{entries: map[string]map[string]any{}, byObj: map[string][]string{}}
}

// Get returns the values indexed under key, ordered by object key.
func (x *Index) Get(key string) []any {
	x.mu.RLock()
	defer x.mu.RUnlock()
	objs := make([]string, 0, len(x.entries[key]))
	for k := range x.entries[key] {
		objs = append(objs, k)
	}
	sort.Strings(objs)
	out := make([]any, len(objs))
	for i, k := range objs {
		out[i] = x.entries[key][k]
	}
	return out
}

// Keys returns the index keys that hold at least one value, sorted.
func (x *Index) Keys() []string {
	x.mu.RLock()
	defer x.mu.RUnlock()
	keys := make([]string, 0, len(x.entries))
	for k := range x.entries {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// set replaces the entries of one object.
func (x *Index) set(obj string, entries map[string]any) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, k := range x.byObj[obj] {
		delete(x.entries[k], obj)
		if len(x.entries[k]) == 0 {
			delete(x.entries, k)
		}
	}
	delete(x.byObj, obj)
	for k, v := range entries {
		if x.entries[k] == nil {
			x.entries[k] = map[string]any{}
		}
		x.entries[k][obj] = v
		x.byObj[obj] = append(x.byObj[obj], k)
	}
}
