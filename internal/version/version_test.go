package version

import (
	"strings"
	"testing"
)

// A build without a stamp is "dev"; a stamped one (deploy/images links
// -X Symbol=<tag>) is its tag.
func TestString(t *testing.T) {
	if v := String(); !strings.HasPrefix(v, "dev") {
		t.Errorf("unstamped: %q, want dev...", v)
	}
	stamped = "v1.2.3"
	t.Cleanup(func() { stamped = "" })
	if v := String(); !strings.HasPrefix(v, "v1.2.3") {
		t.Errorf("stamped v1.2.3: %q", v)
	}
}
