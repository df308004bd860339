package runtime

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash"
	"hash/fnv"
	"io"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The state the runtime keeps on an object is deliberately small so that it
// can never approach the 256 KiB annotation limit (Kopf's #1087): the
// last-handled record holds a hash of the object's essence plus the values of
// watched fields (each capped), and progress records hold numbers and a
// capped message.
const (
	recordKey     = "last-handled"
	maxMessage    = 200
	maxFieldValue = 256
	// maxEventMessage bounds the error in a failure's Event, which is not
	// kept on the object: long enough for an API server's refusal.
	maxEventMessage = 1000
)

// lastHandled is the compact last-handled state: the essence hash, the values
// of the fields OnField handlers watch (values longer than maxFieldValue are
// replaced by their hash, which still detects a change) and, for objects
// with a WithDiff handler, the essence itself up to MaxEssence (what their
// Old and Diff come from; releases before WithDiff kept it for every object
// with update, resume or field handlers).
type lastHandled struct {
	Hash    string                     `json:"h"`
	Fields  map[string]json.RawMessage `json:"f,omitempty"`
	Essence json.RawMessage            `json:"e,omitempty"`
}

// progress is one handler's state within the current cycle.
type progress struct {
	Retries int    `json:"r,omitempty"`
	Started int64  `json:"s,omitempty"` // unix milliseconds of the first attempt
	Delayed int64  `json:"d,omitempty"` // unix milliseconds before which it must not run
	Success bool   `json:"ok,omitempty"`
	Failure bool   `json:"f,omitempty"`
	Message string `json:"m,omitempty"`
}

func (p progress) finished() bool { return p.Success || p.Failure }

// state is everything the runtime read back from one object.
type state struct {
	last     *lastHandled
	progress map[string]progress
}

// readState decodes the records a Storage kept for an object.
func readState(records map[string]string) state {
	st := state{progress: map[string]progress{}}
	for id, v := range records {
		if id == recordKey {
			var r lastHandled
			if json.Unmarshal([]byte(v), &r) == nil {
				st.last = &r
			}
			continue
		}
		var p progress
		if json.Unmarshal([]byte(v), &p) == nil {
			st.progress[id] = p
		}
	}
	return st
}

func encode(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("runtime: encode state: %v", err)) // only plain structs are encoded
	}
	return string(b)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

// essenceHash hashes what a user changes: the whole object without status
// and without metadata other than labels and annotations (minus the
// runtime's own annotations and kubectl's last-applied copy). It walks the
// object with sorted keys instead of encoding it, which keeps dispatch cheap.
func essenceHash(prefix string, obj *unstructured.Unstructured) string {
	h := fnv.New64a()
	keys := make([]string, 0, len(obj.Object))
	for k := range obj.Object {
		if k != "status" && k != "metadata" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		writeString(h, k)
		hashValue(h, obj.Object[k])
	}
	meta, _ := obj.Object["metadata"].(map[string]any)
	writeString(h, "labels")
	hashValue(h, meta["labels"])
	writeString(h, "annotations")
	ann, _ := meta["annotations"].(map[string]any)
	own := make(map[string]any, len(ann))
	for k, v := range ann {
		if !strings.HasPrefix(k, prefix+"/") && k != "kubectl.kubernetes.io/last-applied-configuration" {
			own[k] = v
		}
	}
	hashValue(h, own)
	return fmt.Sprintf("%016x", h.Sum64())
}

func writeString(h hash.Hash64, s string) {
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(s)))
	_, _ = h.Write(n[:])
	_, _ = io.WriteString(h, s)
}

// hashValue feeds a JSON-like value into h, tagging each kind so that
// different structures never collide by concatenation.
func hashValue(h hash.Hash64, v any) {
	var buf [32]byte
	switch x := v.(type) {
	case nil:
		_, _ = h.Write([]byte{'n'})
	case string:
		_, _ = h.Write([]byte{'s'})
		writeString(h, x)
	case bool:
		_, _ = h.Write(strconv.AppendBool(append(buf[:0], 'b'), x))
	case int64:
		_, _ = h.Write(strconv.AppendInt(append(buf[:0], 'i'), x, 10))
	case float64:
		_, _ = h.Write(strconv.AppendFloat(append(buf[:0], 'f'), x, 'g', -1, 64))
	case []any:
		_, _ = h.Write(strconv.AppendInt(append(buf[:0], '['), int64(len(x)), 10))
		for _, e := range x {
			hashValue(h, e)
		}
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		_, _ = h.Write(strconv.AppendInt(append(buf[:0], '{'), int64(len(x)), 10))
		for _, k := range keys {
			writeString(h, k)
			hashValue(h, x[k])
		}
	default: // not produced by JSON decoding; encode it to stay deterministic
		b, _ := json.Marshal(x)
		_, _ = h.Write([]byte{'j'})
		_, _ = h.Write(b)
	}
}

func hashBytes(b []byte) string {
	h := fnv.New64a()
	_, _ = h.Write(b)
	return fmt.Sprintf("%016x", h.Sum64())
}

// fieldValue returns the JSON kept in the record for the field at path.
func fieldValue(obj *unstructured.Unstructured, path string) (json.RawMessage, any, bool) {
	v, ok, _ := unstructured.NestedFieldNoCopy(obj.Object, splitPath(path)...)
	if !ok {
		return nil, nil, false
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, v, true
	}
	if len(b) > maxFieldValue {
		b, _ = json.Marshal("#" + hashBytes(b))
	}
	return b, v, true
}
