package runtime

import (
	"encoding/json"
	"reflect"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// MaxEssence bounds the essence kept in the last-handled record of an object
// with a WithDiff handler: an object whose essence encodes to more bytes
// keeps only the hash, and its update and resume handlers get Old and Diff
// nil. Annotations of one object share
// 256 KiB; a record that outgrew them would block every later patch of the
// object, its finalizer included (Kopf's #1087). ConfigMapStorage keeps
// every record in memory too, so the bound is also its memory per object.
const MaxEssence = 32 << 10

// DiffOp is the kind of one difference.
type DiffOp string

// The differences Diff reports.
const (
	DiffAdd    DiffOp = "add"
	DiffChange DiffOp = "change"
	DiffRemove DiffOp = "remove"
)

// DiffItem is one difference between the last handled and the current
// essence: the field path (map keys from the top; a list is compared and
// reported as one value) and the old and new values (nil when absent).
type DiffItem struct {
	Op       DiffOp
	Path     []string
	Old, New any
}

// essence is what a user changes: the object without status and without
// metadata other than labels and annotations (minus the runtime's own
// annotations and kubectl's last-applied copy), as essenceHash hashes it.
func essence(prefix string, obj *unstructured.Unstructured) map[string]any {
	out := make(map[string]any, len(obj.Object))
	for k, v := range obj.Object {
		if k != "status" && k != "metadata" && k != "apiVersion" && k != "kind" {
			out[k] = v
		}
	}
	meta := map[string]any{}
	if l := obj.GetLabels(); len(l) > 0 {
		meta["labels"] = l
	}
	ann := map[string]any{}
	for k, v := range obj.GetAnnotations() {
		if !strings.HasPrefix(k, prefix+"/") && k != "kubectl.kubernetes.io/last-applied-configuration" {
			ann[k] = v
		}
	}
	if len(ann) > 0 {
		meta["annotations"] = ann
	}
	// Always present, so that a diff names the label or annotation maps
	// rather than all of metadata.
	out["metadata"] = meta
	return out
}

// encodeEssence returns the essence as stored in the record and as handlers
// see it (decoded from that JSON, so that old and new compare alike), or
// nil past MaxEssence.
func encodeEssence(prefix string, obj *unstructured.Unstructured) (json.RawMessage, map[string]any) {
	b, err := json.Marshal(essence(prefix, obj))
	if err != nil || len(b) > MaxEssence {
		return nil, nil
	}
	var m map[string]any
	if json.Unmarshal(b, &m) != nil {
		return nil, nil
	}
	return b, m
}

// diff lists the differences from old to new, in sorted key order.
func diff(path []string, old, new any) []DiffItem {
	om, oldMap := old.(map[string]any)
	nm, newMap := new.(map[string]any)
	if !oldMap || !newMap {
		switch {
		case old == nil && new == nil:
			return nil
		case old == nil:
			return []DiffItem{{Op: DiffAdd, Path: path, New: new}}
		case new == nil:
			return []DiffItem{{Op: DiffRemove, Path: path, Old: old}}
		case reflect.DeepEqual(old, new):
			return nil
		}
		return []DiffItem{{Op: DiffChange, Path: path, Old: old, New: new}}
	}
	keys := make([]string, 0, len(om)+len(nm))
	for k := range om {
		keys = append(keys, k)
	}
	for k := range nm {
		if _, ok := om[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var out []DiffItem
	for _, k := range keys {
		out = append(out, diff(append(slices.Clip(path), k), om[k], nm[k])...)
	}
	return out
}

// under keeps the differences at or below the dotted field path (and those
// above it that replace it whole).
func under(items []DiffItem, field string) []DiffItem {
	want := splitPath(field)
	var out []DiffItem
	for _, d := range items {
		n := min(len(d.Path), len(want))
		if slices.Equal(d.Path[:n], want[:n]) {
			out = append(out, d)
		}
	}
	return out
}

// oldNew is the cycle's view of the essence, computed on first use.
type oldNew struct {
	done     bool
	old, new map[string]any
	raw      json.RawMessage // new, as stored
	diff     []DiffItem
}

// essenceChange returns the last handled and the current essence and their
// differences (old and diff nil when the record holds no essence).
func (c *cycle) essenceChange(prefix string) *oldNew {
	e := &c.essence
	if e.done {
		return e
	}
	e.done = true
	e.raw, e.new = encodeEssence(prefix, c.obj)
	if rec := c.st.last; rec != nil && len(rec.Essence) > 0 {
		if json.Unmarshal(rec.Essence, &e.old) == nil && e.new != nil {
			e.diff = diff(nil, e.old, e.new)
		}
	}
	return e
}

// keptEssence is the essence to store for the object after the cycle's
// patch: the record's own when nothing essential changed (no encoding), else
// a fresh one.
func (c *cycle) keptEssence(prefix string, after *unstructured.Unstructured) json.RawMessage {
	if rec := c.st.last; rec != nil && len(rec.Essence) > 0 && rec.Hash == c.last.Hash {
		return rec.Essence
	}
	if after == c.obj && c.essence.done {
		return c.essence.raw
	}
	raw, _ := encodeEssence(prefix, after)
	return raw
}

// onlyEssenceDropped reports whether the record to write differs from the
// stored one only by the essence an earlier release kept for every object
// with update, resume or field handlers, which no handler of the object
// asks for now (WithDiff). Dropping it is worth no write of its own: after
// an upgrade that would patch every object at once. The record goes slim
// with the object's next write.
func (c *cycle) onlyEssenceDropped() bool {
	rec := c.st.last
	if c.keepEssence || rec == nil || len(rec.Essence) == 0 {
		return false
	}
	was := c.last
	was.Essence = rec.Essence
	return encode(was) == c.records[recordKey]
}
