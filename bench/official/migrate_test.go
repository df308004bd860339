package official

import (
	"strings"
	"testing"
	"time"
)

func TestGapStats(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	results := []probeResult{
		{at: at(-100), ok: true}, {at: at(0), ok: true}, {at: at(50), ok: false}, {at: at(100), ok: false}, {at: at(1600), ok: true}, {at: at(1650), ok: true}, {at: at(1700), ok: false},
	}
	reqs, failed, gap := gapStats(results, at(10))
	if reqs != 7 || failed != 3 {
		t.Errorf("requests %d failed %d, want 7 and 3", reqs, failed)
	}
	// From the switch (10 ms) to the next success (1600 ms).
	if gap != 1590*time.Millisecond {
		t.Errorf("gap %s, want 1.59s", gap)
	}
	// Failures to the end count as a gap too.
	if _, _, gap := gapStats([]probeResult{{at: at(0), ok: true}, {at: at(500), ok: false}, {at: at(900), ok: false}}, at(0)); gap != 900*time.Millisecond {
		t.Errorf("trailing gap %s, want 900ms", gap)
	}
}

func TestMigrateReport(t *testing.T) {
	dev := Device{ID: "n1", Name: "my-app.tail.ts.net", Addresses: []string{"100.64.0.3"}}
	r := MigrateReport{Rows: []MigrateRow{
		{Object: "Ingress", Before: []Device{dev}, After: []Device{dev}, Requests: 600, Fail: 2, Gap: 1234 * time.Millisecond},
		{Object: "exposed Service", Before: []Device{dev}, After: []Device{{ID: "n2", Name: "x"}}, Extra: []string{"default-postgres-1.tail.ts.net"}},
	}}
	var b strings.Builder
	if err := r.Write(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| Ingress | my-app.tail.ts.net (n1, 100.64.0.3) | my-app.tail.ts.net (n1, 100.64.0.3) | yes | 600 | 2 | 1.23s |",
		"| **no** (also default-postgres-1.tail.ts.net) |", "Nothing left behind"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
}
