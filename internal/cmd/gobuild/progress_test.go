package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/log"
)

func TestParseBuildArgs(t *testing.T) {
	for _, tc := range []struct {
		args           []string
		flags, pkgs    string
		label, wantErr string
	}{
		{args: []string{"-C", "kind-e2e", "-o", "/x/", "./cmd/devcluster", "./cmd/devcluster-echo"},
			flags: "[]", pkgs: "[./cmd/devcluster ./cmd/devcluster-echo]", label: "devcluster, devcluster-echo"},
		{args: []string{"-C", "kind-e2e", "-ldflags", "-w -X a=b", "-tags=conformance", "k8s.io/kubernetes/cmd/kubelet"},
			flags: "[-tags=conformance]", pkgs: "[k8s.io/kubernetes/cmd/kubelet]", label: "kubelet"},
		{args: []string{"-trimpath", "-o", "bin/", "./..."}, flags: "[]", pkgs: "[./...]", label: "."},
		{args: []string{"-o", "bin/"}, flags: "[]", pkgs: "[.]", label: "."},
		{args: []string{"-o"}, wantErr: "flag -o needs a value"},
	} {
		inv, err := parseBuildArgs(tc.args)
		if tc.wantErr != "" {
			if err == nil || err.Error() != tc.wantErr {
				t.Errorf("%q: error %v, want %q", tc.args, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		if got := fmt.Sprint(inv.listFlags); got != tc.flags {
			t.Errorf("%q: list flags %s, want %s", tc.args, got, tc.flags)
		}
		if got := fmt.Sprint(inv.packages); got != tc.pkgs {
			t.Errorf("%q: packages %s, want %s", tc.args, got, tc.pkgs)
		}
		if got := fmt.Sprint(inv.buildArgs()); strings.HasPrefix(fmt.Sprint(tc.args), "[-C") && !strings.HasPrefix(got, "[build -C kind-e2e -v -") {
			t.Errorf("%q: go %s", tc.args, got)
		}
		if got := inv.defaultLabel(); got != tc.label {
			t.Errorf("%q: label %q, want %q", tc.args, got, tc.label)
		}
	}
}

func TestProgressReport(t *testing.T) {
	start := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	p := newProgress("devcluster", start)
	for _, line := range []string{"go: downloading example.com/m v1.0.0", "# example.com/bad", "./x.go:3:2: undefined: y", "\tsomething"} {
		if p.compiled(line) {
			t.Errorf("%q counted as a package", line)
		}
	}
	// Before go list answers: counted without a total.
	for _, line := range []string{"internal/abi", "example.com/p0", "example.com/p1"} {
		if !p.compiled(line) {
			t.Fatalf("%q not counted", line)
		}
	}
	if line, _ := p.report(start.Add(2*time.Second), true); line != "building devcluster: 3 packages compiled (2s), counting what is left" {
		t.Errorf("before the total: %q", line)
	}
	stale := map[string]bool{"internal/abi": true}
	for i := range 20 {
		stale[fmt.Sprintf("example.com/p%d", i)] = true
	}
	delete(stale, "example.com/p1") // up to date after all
	p.setStale(stale)
	if p.done != 2 || p.total() != 20 {
		t.Fatalf("after go list: %d/%d", p.done, p.total())
	}
	p.compiled("example.com/p0")
	if p.done != 2 {
		t.Error("a package counted twice")
	}
	p.compiled("example.com/p2")
	p.compiled("example.com/cmd/app") // a main package: not in the total
	if line, _ := p.report(start.Add(75*time.Second), true); line != "building devcluster: 3/20 packages, 15% (1m15s), last example.com/cmd/app" {
		t.Errorf("on a terminal: %q", line)
	}

	// Elsewhere: a line per tenth of the packages (2 here) or 30 s.
	if _, ok := p.report(start.Add(76*time.Second), false); !ok {
		t.Error("no line after 3 packages")
	}
	p.compiled("example.com/p3")
	if line, ok := p.report(start.Add(80*time.Second), false); ok {
		t.Errorf("a line after one more package and 4 s: %q", line)
	}
	if _, ok := p.report(start.Add(107*time.Second), false); !ok {
		t.Error("no line after 31 s")
	}
	for i := 4; i < 20; i++ {
		p.compiled(fmt.Sprintf("example.com/p%d", i))
	}
	if line, ok := p.report(start.Add(200*time.Second), false); !ok || line != "building devcluster: linking (3m20s)" {
		t.Errorf("when every package is compiled: %q %v", line, ok)
	}
}

// TestRunCountsWhatGoBuildCompiles builds a module of two packages made
// for this run (so both are out of date) with the real go command.
func TestRunCountsWhatGoBuildCompiles(t *testing.T) {
	dir := t.TempDir()
	stamp := time.Now().UnixNano()
	files := map[string]string{
		"go.mod":          "module example.com/gobuildtest\n\ngo 1.24\n",
		"lib/lib.go":      fmt.Sprintf("package lib\n\nconst Stamp = %d\n", stamp),
		"cmd/app/main.go": "package main\n\nimport \"example.com/gobuildtest/lib\"\n\nfunc main() { println(lib.Stamp) }\n",
		"bad/bad.go":      "package bad\n\nfunc f() { undefined() }\n",
	}
	for name, text := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var out, logs bytes.Buffer
	logger := log.NewWithOptions(&logs, log.Options{})
	code, err := run(context.Background(), []string{"-C", dir, "-o", filepath.Join(dir, "out") + "/", "./cmd/app"}, "", &out, false, logger)
	if err != nil || code != 0 {
		t.Fatalf("exit %d, %v; output %s; logs %s", code, err, out.String(), logs.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "out", "app")); err != nil {
		t.Fatalf("no binary: %v", err)
	}
	for _, want := range []string{"building app", "built app in"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("logs lack %q:\n%s", want, logs.String())
		}
	}
	if strings.Contains(out.String(), "example.com/gobuildtest") {
		t.Errorf("package names passed on as output:\n%s", out.String())
	}

	// Again: nothing to compile, and nothing counted (go list calls the
	// main package stale: its binary is not installed).
	logs.Reset()
	code, err = run(context.Background(), []string{"-C", dir, "-o", filepath.Join(dir, "out") + "/", "./cmd/app"}, "", &out, false, logger)
	if err != nil || code != 0 {
		t.Fatalf("exit %d, %v", code, err)
	}
	for _, want := range []string{"(0 packages compiled)"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("second build: logs lack %q:\n%s", want, logs.String())
		}
	}

	// A build that fails: its errors pass through, its status is go build's.
	out.Reset()
	logs.Reset()
	code, err = run(context.Background(), []string{"-C", dir, "./bad"}, "bad", &out, false, logger)
	if err != nil || code != 1 {
		t.Fatalf("exit %d, %v", code, err)
	}
	if !strings.Contains(out.String(), "undefined: undefined") {
		t.Errorf("the compiler's error not passed on:\n%s", out.String())
	}
	if !strings.Contains(logs.String(), "building bad failed after") {
		t.Errorf("logs:\n%s", logs.String())
	}
}
