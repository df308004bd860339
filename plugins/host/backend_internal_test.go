package host

import "testing"

// Backends are named "<namespace>/<service>:<port>"; a plugin may use the
// short "<service>:<port>" of the route's namespace, never another
// namespace's.
func TestBackendNamed(t *testing.T) {
	for _, c := range []struct {
		full, name string
		want       bool
	}{
		{"apps/web-canary:80", "apps/web-canary:80", true},
		{"apps/web-canary:80", "web-canary:80", true},
		{"apps/web-canary:80", "web-canary:8080", false},
		{"apps/web-canary:80", "other/web-canary:80", false},
		{"apps/web-canary:80", "canary:80", false},
		{"web:80", "web:80", true}, // names without a namespace (local configs) match exactly
		{"web:80", "x/web:80", false},
	} {
		if got := backendNamed(c.full, c.name); got != c.want {
			t.Errorf("backendNamed(%q, %q) = %v, want %v", c.full, c.name, got, c.want)
		}
	}
}
