package official

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// A side whose deletion did not finish keeps its creation lines; only the
// deletion line is missing, saying why.
func TestScaleLinesKeepWhatWasMeasured(t *testing.T) {
	cfg := Config{ScaleServices: 2, ScaleIngresses: 2}
	api := APICount{Requests: 40, Writes: 20, ByCall: map[string]int{"patch secrets": 40}}
	r := [2]ScaleResult{
		{Parents: 4, Created: 10 * time.Second, PeakRSS: 100, CPU: 5, API: api, CreateMeasured: true, Left: []string{"2 services"}},
		{Parents: 4, Created: 5 * time.Second, PeakRSS: 50, CPU: 2, API: api, Deleted: 3 * time.Second, CreateMeasured: true, DeleteMeasured: true},
	}
	lines, notes := ScaleLines(cfg, r, [2]error{errors.New("deletion timed out"), nil})
	if len(lines) != 6 {
		t.Fatalf("%d lines, want 6", len(lines))
	}
	if l := lines[0]; l.Missing != "" || l.Official != 10 || l.Tailplane != 5 {
		t.Errorf("creation line = %+v, want 10 s and 5 s", l)
	}
	if l := lines[3]; l.Official != 10 || l.Tailplane != 10 {
		t.Errorf("requests per parent = %+v, want 10 and 10", l)
	}
	if l := lines[5]; !strings.Contains(l.Missing, "official: deletion timed out") {
		t.Errorf("deletion line Missing = %q, want the official side's error", l.Missing)
	}
	if !strings.Contains(strings.Join(notes, "\n"), "left after the delete: 2 services") {
		t.Errorf("notes %q do not name what was left", notes)
	}
}
