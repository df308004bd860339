package node

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestImageMapResolve(t *testing.T) {
	dir := t.TempDir()
	echo := filepath.Join(dir, "echo")
	if err := os.WriteFile(echo, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	m := ImageMap{
		{Glob: "*tailplane/echo*", Binary: echo},
		{Glob: "*tailplane/proxy*", Binary: filepath.Join(dir, "missing")},
	}
	for _, image := range []string{"ghcr.io/tailplane/echo:dev", "tailplane/echo", "ghcr.io/tailplane/echo@sha256:abc"} {
		got, err := m.Resolve(image)
		if err != nil || got != echo {
			t.Errorf("Resolve(%q) = %q, %v; want %q", image, got, err, echo)
		}
	}
	_, err := m.Resolve("docker.io/library/nginx:1")
	if err == nil || !strings.Contains(err.Error(), `"docker.io/library/nginx:1" is not in devcluster's image map`) ||
		!strings.Contains(err.Error(), "*tailplane/echo*="+echo) {
		t.Errorf("unknown image: error %v does not name the image and list the map", err)
	}
	_, err = m.Resolve("ghcr.io/tailplane/proxy:v1")
	if err == nil || !strings.Contains(err.Error(), "which is missing") {
		t.Errorf("mapped but missing binary: got %v", err)
	}
}

func TestParseImageRule(t *testing.T) {
	if r, err := ParseImageRule("*foo*=/bin/foo"); err != nil || r.Glob != "*foo*" || r.Binary != "/bin/foo" {
		t.Errorf("ParseImageRule = %+v, %v", r, err)
	}
	for _, bad := range []string{"nobinary", "=/bin/x", "glob=", "[=/bin/x"} {
		if _, err := ParseImageRule(bad); err == nil {
			t.Errorf("ParseImageRule(%q) accepted", bad)
		}
	}
}

func TestExpandAndArgv(t *testing.T) {
	vars := map[string]string{"A": "1", "B": "two"}
	for in, want := range map[string]string{
		"$(A)-$(B)": "1-two", "no vars": "no vars", "$(MISSING)": "$(MISSING)", "x$(A": "x$(A",
	} {
		if got := expand(in, vars); got != want {
			t.Errorf("expand(%q) = %q, want %q", in, got, want)
		}
	}
	got := argv("/bin/echo-server", []string{"/entry", "--a=$(A)"}, []string{"$(B)"}, []string{"A=1", "B=two"})
	if strings.Join(got, " ") != "/entry --a=1 two" {
		t.Errorf("argv = %q", got)
	}
	if got := argv("/bin/x", nil, []string{"y"}, nil); strings.Join(got, " ") != "/bin/x y" {
		t.Errorf("argv without command = %q", got)
	}
}
