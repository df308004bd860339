package imagebuild_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"debug/buildinfo"
	"debug/elf"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// elfMachines are the ELF machine of each architecture.
var elfMachines = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

// checkBinary checks that the binary is one for the platform, static and
// built as a release (CGO_ENABLED=0, -trimpath, stripped, fallback CA roots
// linked in).
func checkBinary(t *testing.T, p v1.Platform, binary []byte) {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(binary))
	if err != nil {
		t.Fatalf("not an ELF binary: %v", err)
	}
	if want, ok := elfMachines[p.Architecture]; ok && f.Machine != want {
		t.Errorf("ELF machine %s, want %s for %s", f.Machine, want, p)
	}
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			t.Errorf("binary asks for a dynamic loader: not static")
		}
	}
	if f.Section(".symtab") != nil {
		t.Errorf("binary still has a symbol table: not stripped")
	}
	info, err := buildinfo.Read(bytes.NewReader(binary))
	if err != nil {
		t.Fatalf("build info: %v", err)
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	if settings["CGO_ENABLED"] != "0" || settings["-trimpath"] != "true" {
		t.Errorf("build settings CGO_ENABLED=%q -trimpath=%q", settings["CGO_ENABLED"], settings["-trimpath"])
	}
	if !slices.ContainsFunc(info.Deps, func(m *debug.Module) bool { return m.Path == "golang.org/x/crypto/x509roots/fallback" }) {
		t.Errorf("golang.org/x/crypto/x509roots/fallback is not linked in: no CA roots without a CA file")
	}
	if settings["GOARCH"] != p.Architecture || settings["GOOS"] != p.OS {
		t.Errorf("built for %s/%s, want %s", settings["GOOS"], settings["GOARCH"], p)
	}
}

// runBinary runs the binary here: --version prints the version the build
// stamped; without its settings it must fail at once with its own message,
// which proves it is our program and runs without anything from the image's
// (empty) base.
func runBinary(ctx context.Context, t *testing.T, cmd, version string, binary []byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), cmd)
	if err := os.WriteFile(path, binary, 0o755); err != nil {
		t.Fatal(err)
	}

	runCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	run := exec.CommandContext(runCtx, path)
	run.Dir = t.TempDir()
	var want []string // substrings of the output
	switch cmd {
	case "tailplane-operator":
		run.Env = []string{"OPERATOR_LOGGING=loud"}
		// Whether OPERATOR_NAMESPACE is also reported depends on the machine
		// (a pod has a service-account namespace file).
		want = []string{"tailplane-operator: invalid settings: ", `OPERATOR_LOGGING: "loud" is not one of info, debug, dev`}
	case "tailplane-proxy":
		run.Env = []string{"TAILPLANE_STATE_DIR=" + t.TempDir()}
		want = []string{"tailplane-proxy: cannot start", "set exactly one of TAILPLANE_CONFIG_SECRET and TAILPLANE_CONFIG_FILE"}
	}
	if out, err := exec.CommandContext(runCtx, path, "--version").CombinedOutput(); err != nil || !strings.HasPrefix(string(out), cmd+" "+version+" ") {
		t.Errorf("%s --version: %v, output %q; want %q first", cmd, err, out, cmd+" "+version)
	}
	out, err := run.CombinedOutput()
	var exit *exec.ExitError
	said := func(s string) bool { return strings.Contains(string(out), s) }
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !allOf(want, said) {
		t.Errorf("%s without settings: %v, output:\n%s\nwant exit 1 and %q", cmd, err, out, want)
	}
}

func allOf(items []string, f func(string) bool) bool {
	for _, it := range items {
		if !f(it) {
			return false
		}
	}
	return true
}

// sourceState fingerprints the checkout: HEAD, the changes to tracked files
// and the untracked files' content (go build stamps the commit into
// binaries; any file may be source).
func sourceState(t *testing.T, dir string) string {
	t.Helper()
	git := func(args ...string) []byte {
		out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).Output()
		if err != nil {
			t.Fatalf("git %v: %v", args, err)
		}
		return out
	}
	h := sha256.New()
	h.Write(git("rev-parse", "HEAD"))
	h.Write(git("diff", "HEAD"))
	for _, f := range strings.Split(strings.TrimSpace(string(git("ls-files", "--others", "--exclude-standard"))), "\n") {
		if f == "" {
			continue
		}
		h.Write([]byte(f))
		if b, err := os.ReadFile(filepath.Join(dir, f)); err == nil {
			h.Write(b)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}
