package sdk

import (
	"slices"
	"testing"
	"unsafe"
)

func TestRecentStringsReturnsTheRememberedCopy(t *testing.T) {
	var r recentStrings
	buf := []byte("always")
	first := r.get(buf)
	if first != "always" {
		t.Fatalf("get = %q", first)
	}
	// The caller's buffer is reused for the next read: the string must not
	// share it.
	copy(buf, "ALWAYS")
	if first != "always" {
		t.Fatalf("the returned string changed with the buffer: %q", first)
	}
	again := r.get([]byte("always"))
	if unsafe.StringData(again) != unsafe.StringData(first) {
		t.Error("an equal value was copied again instead of returned from memory")
	}
	if got := r.get([]byte("ALWAYS")); got != "ALWAYS" {
		t.Errorf("a different value: got %q", got)
	}
	if got := r.get(nil); got != "" {
		t.Errorf("empty: got %q", got)
	}
	if n := testing.AllocsPerRun(100, func() { _ = r.get(buf) }); n != 0 {
		t.Errorf("a remembered value allocates %v times", n)
	}
}

func TestRecentStringsForgetsTheOldest(t *testing.T) {
	var r recentStrings
	first := r.get([]byte("v0"))
	for i := range len(r.vals) {
		r.get([]byte{'x', byte('a' + i)})
	}
	if got := r.get([]byte("v0")); got != "v0" || unsafe.StringData(got) == unsafe.StringData(first) {
		t.Errorf("v0 after %d newer values: %q, same copy %v", len(r.vals), got, unsafe.StringData(got) == unsafe.StringData(first))
	}
}

func TestRecentListsSplitsTheEncoding(t *testing.T) {
	var strs recentStrings
	var lists recentLists
	for _, tc := range []struct {
		raw  string
		want []string
	}{
		{"", []string{}},
		{"a\x00", []string{"a"}},
		{"default/web:80\x00default/web-canary:80\x00", []string{"default/web:80", "default/web-canary:80"}},
		{"\x00b\x00", []string{"", "b"}},
		{"tail", []string{"tail"}}, // not NUL-terminated: kept
	} {
		if got := lists.get(&strs, []byte(tc.raw)); !slices.Equal(got, tc.want) {
			t.Errorf("%q: got %q, want %q", tc.raw, got, tc.want)
		}
	}
}

func TestRecentListsReturnsTheSameListForTheSameEncoding(t *testing.T) {
	var strs recentStrings
	var lists recentLists
	raw := []byte("default/web:80\x00default/web-canary:80\x00")
	first := lists.get(&strs, raw)
	copy(raw, "XXXXXXX") // the scratch buffer is reused
	if first[0] != "default/web:80" {
		t.Fatalf("the list changed with the buffer: %q", first)
	}
	raw = []byte("default/web:80\x00default/web-canary:80\x00")
	if n := testing.AllocsPerRun(100, func() { _ = lists.get(&strs, raw) }); n != 0 {
		t.Errorf("a remembered list allocates %v times", n)
	}
	// append must not write into the remembered list.
	grown := append(lists.get(&strs, raw), "extra")
	if again := lists.get(&strs, raw); len(again) != 2 || &grown[0] == &again[0] {
		t.Errorf("append changed the remembered list: %q", again)
	}
	if got := lists.get(&strs, []byte("other\x00")); !slices.Equal(got, []string{"other"}) {
		t.Errorf("another list: %q", got)
	}
}
