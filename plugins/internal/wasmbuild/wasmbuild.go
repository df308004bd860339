// Package wasmbuild builds guest modules for tests and benchmarks, so CI
// proves the guests build: Go guests with GOOS=wasip1 -buildmode=c-shared,
// the AssemblyScript example with npm. Outputs go to <repo>/.cache/plugins;
// wazero's compilation cache for them is <repo>/.cache/wazero.
//
// It imports only the standard library.
package wasmbuild

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// buildTimeout bounds one build (a cold Go wasm build takes ~15 s on 2 cores,
// a cold npm install a few seconds).
const buildTimeout = 5 * time.Minute

// Root returns the main module's directory.
func Root(tb testing.TB) string {
	tb.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		tb.Fatalf("go env GOMOD: %v", err)
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}

// CompilationCacheDir is where tests keep wazero's file compilation cache.
func CompilationCacheDir(tb testing.TB) string { return filepath.Join(Root(tb), ".cache", "wazero") }

// OutputDir is where built guests go.
func OutputDir(tb testing.TB) string { return filepath.Join(Root(tb), ".cache", "plugins") }

// Go builds the Go guest package pkg (a path relative to the repository
// root, e.g. "./plugins/examples/canary") and returns the module's bytes.
func Go(tb testing.TB, pkg string) []byte {
	tb.Helper()
	root := Root(tb)
	out := filepath.Join(OutputDir(tb), filepath.Base(pkg)+".wasm")
	run(tb, root, []string{"GOOS=wasip1", "GOARCH=wasm"}, "go", "build", "-buildmode=c-shared", "-trimpath", "-o", tmpName(out), pkg)
	return finish(tb, out)
}

// GoCommand builds pkg as a WASI command (without -buildmode=c-shared), the
// mistake the host must refuse with a clear error.
func GoCommand(tb testing.TB, pkg string) []byte {
	tb.Helper()
	out := filepath.Join(OutputDir(tb), filepath.Base(pkg)+"-command.wasm")
	run(tb, Root(tb), []string{"GOOS=wasip1", "GOARCH=wasm"}, "go", "build", "-trimpath", "-o", tmpName(out), pkg)
	return finish(tb, out)
}

// AssemblyScript builds the AssemblyScript example with npm and returns the
// module's bytes.
func AssemblyScript(tb testing.TB) []byte {
	tb.Helper()
	root := Root(tb)
	dir := filepath.Join(root, "plugins", "examples", "assemblyscript")
	out := filepath.Join(OutputDir(tb), "assemblyscript-canary.wasm")
	unlock := lock(tb, filepath.Join(OutputDir(tb), ".npm.lock"))
	defer unlock()
	if _, err := os.Stat(filepath.Join(dir, "node_modules", ".bin", "asc")); err != nil {
		run(tb, dir, nil, "npm", "ci", "--no-audit", "--no-fund")
	}
	run(tb, dir, nil, "npx", "asc", "assembly/index.ts", "--outFile", tmpName(out),
		"-O3", "--runtime", "stub", "--use", "abort=", "--exportStart", "_initialize")
	return finish(tb, out)
}

// tmpName is a per-process output name: test packages build in parallel.
func tmpName(out string) string { return fmt.Sprintf("%s.%d.tmp", out, os.Getpid()) }

func finish(tb testing.TB, out string) []byte {
	tb.Helper()
	if err := os.Rename(tmpName(out), out); err != nil {
		tb.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func run(tb testing.TB, dir string, env []string, name string, args ...string) {
	tb.Helper()
	if err := os.MkdirAll(OutputDir(tb), 0o755); err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// lock takes an exclusive file lock (npm must not run twice in one folder).
func lock(tb testing.TB, path string) func() {
	tb.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		tb.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		tb.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		tb.Fatal(err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		_ = f.Close()
	}
}
