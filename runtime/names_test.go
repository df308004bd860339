package runtime

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The runtime knows nothing of the operator built on it: its own names are
// Settings, and only their defaults (in settings.go) may name Tailplane.
// Doc comments say so once (doc.go).
func TestMemoryNoOperatorNames(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			l := strings.ToLower(line)
			if !strings.Contains(l, "tailplane") && !strings.Contains(l, "tailscale") {
				continue
			}
			allowed := (f == "settings.go" && (strings.Contains(line, "str(&s.") || strings.Contains(line, "default"))) ||
				(f == "doc.go" && strings.Contains(line, "defaults only are Tailplane's"))
			if !allowed {
				t.Errorf("%s:%d names the operator: %s", f, i+1, strings.TrimSpace(line))
			}
		}
	}
}
