package runtime

import (
	"context"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/tailplane/tailplane/internal/testpoll"
)

// byName records the Events of handler calls per object.
type byName struct {
	mu  sync.Mutex
	evs map[string][]*Event
}

func (b *byName) fn(_ context.Context, ev *Event) (any, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.evs == nil {
		b.evs = map[string][]*Event{}
	}
	b.evs[ev.Object.GetName()] = append(b.evs[ev.Object.GetName()], ev)
	// The handler's own change must not come back as an update.
	ev.Patch.SetAnnotation("example.com/seen", ev.Cause.String())
	return nil, nil
}

func (b *byName) of(name string) []*Event {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]*Event(nil), b.evs[name]...)
}

// record is the last-handled annotation of name as the API server holds it.
func (m *memory) record(name string) string {
	return m.get(name).GetAnnotations()[m.op.settings.Prefix+"/"+recordKey]
}

// Without WithDiff an update handler gets no Old, New or Diff and the
// object's record holds the essence's hash only; with it, both are as they
// always were. Either way status-only changes, no-op patches and the
// handlers' own patches dispatch nothing.
func TestMemoryDiffIsOptIn(t *testing.T) {
	m := newMemory(t, Settings{})
	var plain, withDiff byName
	if err := m.op.OnUpdate(memGVR, "plain", plain.fn, Label("diff", "no")); err != nil {
		t.Fatal(err)
	}
	if err := m.op.OnUpdate(memGVR, "diff", withDiff.fn, Label("diff", "yes"), WithDiff()); err != nil {
		t.Fatal(err)
	}
	m.run()
	blob := strings.Repeat("x", 4096)
	m.create("a", map[string]any{"size": int64(1), "blob": blob}, map[string]string{"diff": "no"}, nil)
	m.create("b", map[string]any{"size": int64(1), "blob": blob}, map[string]string{"diff": "yes"}, nil)
	testpoll.UntilTrue(t, 10*time.Second, "both records written", func() bool { return m.record("a") != "" && m.record("b") != "" })
	if rec := m.record("a"); len(rec) > 40 || strings.Contains(rec, `"e"`) {
		t.Fatalf("record without WithDiff: %d bytes %q, want the hash only", len(rec), truncate(rec, 80))
	}
	if rec := m.record("b"); len(rec) < len(blob) || !strings.Contains(rec, `"e":`) {
		t.Fatalf("record with WithDiff: %d bytes, want the essence in it", len(rec))
	}

	for _, name := range []string{"a", "b"} {
		m.patch(name, `{"status":{"ready":true}}`)
		m.patch(name, `{"spec":{"size":1}}`)
		m.patch(name, `{"metadata":{"annotations":{"`+m.op.settings.Prefix+`/other":"x"}}}`)
	}
	testpoll.UntilTrue(t, 10*time.Second, "status patches seen", func() bool {
		return m.cached("a").Object["status"] != nil && m.cached("b").Object["status"] != nil
	})
	testpoll.AlwaysTrue(t, 300*time.Millisecond, "no update for status, no-op and own-prefix changes", func() bool {
		return len(plain.of("a")) == 0 && len(withDiff.of("b")) == 0
	})

	m.patch("a", `{"spec":{"size":2}}`)
	m.patch("b", `{"spec":{"size":2}}`)
	testpoll.UntilTrue(t, 10*time.Second, "one update each", func() bool { return len(plain.of("a")) == 1 && len(withDiff.of("b")) == 1 })
	if ev := plain.of("a")[0]; ev.Old != nil || ev.New != nil || ev.Diff != nil {
		t.Fatalf("without WithDiff: Old %v, New %v, Diff %v; want all nil", ev.Old, ev.New, ev.Diff)
	}
	ev := withDiff.of("b")[0]
	want := []DiffItem{{Op: DiffChange, Path: []string{"spec", "size"}, Old: float64(1), New: float64(2)}}
	oldSpec, _ := ev.Old.(map[string]any)["spec"].(map[string]any)
	if !reflect.DeepEqual(ev.Diff, want) || oldSpec["size"] != float64(1) || oldSpec["blob"] != blob {
		t.Fatalf("with WithDiff: Old %v, Diff %+v; want size 1 -> 2", ev.Old, ev.Diff)
	}
	testpoll.UntilTrue(t, 10*time.Second, "own patches written", func() bool {
		return m.cached("a").GetAnnotations()["example.com/seen"] == "update" && m.cached("b").GetAnnotations()["example.com/seen"] == "update"
	})
	testpoll.AlwaysTrue(t, 300*time.Millisecond, "the handlers' own patches dispatch nothing", func() bool {
		return len(plain.of("a")) == 1 && len(withDiff.of("b")) == 1
	})
	if rec := m.record("a"); len(rec) > 40 {
		t.Fatalf("record without WithDiff after an update: %d bytes", len(rec))
	}
}

// An OnField handler gets its field's old and new values with or without
// WithDiff; the differences below the field only with it.
func TestMemoryFieldDiffIsOptIn(t *testing.T) {
	m := newMemory(t, Settings{})
	var plain, withDiff byName
	if err := m.op.OnField(memGVR, "plain", "spec.size", plain.fn, Label("diff", "no")); err != nil {
		t.Fatal(err)
	}
	if err := m.op.OnField(memGVR, "diff", "spec.size", withDiff.fn, Label("diff", "yes"), WithDiff()); err != nil {
		t.Fatal(err)
	}
	m.run()
	m.create("a", map[string]any{"size": int64(1)}, map[string]string{"diff": "no"}, nil)
	m.create("b", map[string]any{"size": int64(1)}, map[string]string{"diff": "yes"}, nil)
	testpoll.UntilTrue(t, 10*time.Second, "create seen", func() bool { return len(plain.of("a")) == 1 && len(withDiff.of("b")) == 1 })
	testpoll.UntilTrue(t, 10*time.Second, "records written", func() bool { return m.record("a") != "" && m.record("b") != "" })
	m.patch("a", `{"spec":{"size":2}}`)
	m.patch("b", `{"spec":{"size":2}}`)
	testpoll.UntilTrue(t, 10*time.Second, "change seen", func() bool { return len(plain.of("a")) == 2 && len(withDiff.of("b")) == 2 })
	if ev := plain.of("a")[1]; ev.Old != float64(1) || ev.New != int64(2) || ev.Diff != nil {
		t.Fatalf("without WithDiff: Old %v, New %v, Diff %v; want 1 -> 2 and no diff", ev.Old, ev.New, ev.Diff)
	}
	want := []DiffItem{{Op: DiffChange, Path: []string{"spec", "size"}, Old: float64(1), New: float64(2)}}
	if ev := withDiff.of("b")[1]; ev.Old != float64(1) || !reflect.DeepEqual(ev.Diff, want) {
		t.Fatalf("with WithDiff: Old %v, Diff %+v; want 1 -> 2 with its diff", ev.Old, ev.Diff)
	}
}

// WithDiff on a handler that never sees an update is a registration error.
func TestMemoryWithDiffNeedsAnUpdateCause(t *testing.T) {
	m := newMemory(t, Settings{})
	if err := m.op.OnCreate(memGVR, "create", func(context.Context, *Event) (any, error) { return nil, nil }, WithDiff()); err == nil {
		t.Fatal("WithDiff on a create handler accepted")
	}
}

// previousRecord is the last-handled record the previous release wrote for
// an object with update handlers: the hash and the whole essence.
func previousRecord(prefix string, obj *unstructured.Unstructured) string {
	raw, _ := encodeEssence(prefix, obj)
	return encode(lastHandled{Hash: essenceHash(prefix, obj), Essence: raw})
}

// Objects handled by the previous release carry the essence in their
// record. They are not handled as new or changed; without WithDiff the
// essence is not rewritten on its own (no write per object at the
// upgrade) and goes with the next write; with WithDiff it is the Old of
// the first update.
func TestMemoryRecordsOfThePreviousRelease(t *testing.T) {
	m := newMemory(t, Settings{})
	var created, plain, withDiff byName
	prefix := m.op.settings.Prefix
	for _, err := range []error{
		m.op.OnCreate(memGVR, "create", created.fn),
		m.op.OnUpdate(memGVR, "plain", plain.fn, Label("diff", "no")),
		m.op.OnUpdate(memGVR, "diff", withDiff.fn, Label("diff", "yes"), WithDiff()),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	spec := map[string]any{"size": int64(1)}
	recA := previousRecord(prefix, widget("a", spec, map[string]string{"diff": "no"}, nil))
	recB := previousRecord(prefix, widget("b", spec, map[string]string{"diff": "yes"}, nil))
	m.create("a", spec, map[string]string{"diff": "no"}, map[string]string{prefix + "/" + recordKey: recA})
	m.create("b", spec, map[string]string{"diff": "yes"}, map[string]string{prefix + "/" + recordKey: recB})
	m.run()
	testpoll.UntilTrue(t, 10*time.Second, "cached", func() bool { return m.cached("a") != nil && m.cached("b") != nil })
	testpoll.AlwaysTrue(t, 300*time.Millisecond, "neither created nor updated, records as they were", func() bool {
		return len(created.of("a"))+len(created.of("b"))+len(plain.of("a"))+len(withDiff.of("b")) == 0 &&
			m.record("a") == recA && m.record("b") == recB
	})
	m.patch("a", `{"spec":{"size":2}}`)
	m.patch("b", `{"spec":{"size":2}}`)
	testpoll.UntilTrue(t, 10*time.Second, "one update each", func() bool { return len(plain.of("a")) == 1 && len(withDiff.of("b")) == 1 })
	if ev := plain.of("a")[0]; ev.Old != nil || ev.Diff != nil {
		t.Fatalf("without WithDiff: Old %v, Diff %v", ev.Old, ev.Diff)
	}
	want := []DiffItem{{Op: DiffChange, Path: []string{"spec", "size"}, Old: float64(1), New: float64(2)}}
	if ev := withDiff.of("b")[0]; !reflect.DeepEqual(ev.Diff, want) {
		t.Fatalf("with WithDiff: Diff %+v, want the stored essence's size 1 -> 2", ev.Diff)
	}
	testpoll.UntilTrue(t, 10*time.Second, "records rewritten", func() bool {
		return m.record("a") != recA && m.record("b") != recB
	})
	if rec := m.record("a"); strings.Contains(rec, `"e"`) || len(rec) > 40 {
		t.Fatalf("record without WithDiff after the first write: %q, want the hash only", rec)
	}
	if rec := m.record("b"); !strings.Contains(rec, `"size":2`) {
		t.Fatalf("record with WithDiff after the first write: %q, want the new essence", rec)
	}
}
