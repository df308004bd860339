package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/charmbracelet/log"
)

// TestMain lets the test binary stand in for devcluster: with
// FAKE_DEVCLUSTER set to a folder, it records its arguments there, prints
// the ready line and waits for SIGINT or SIGTERM, then records the signal.
// FAKE_DEVCLUSTER_FAIL makes it exit 3 before it is ready.
func TestMain(m *testing.M) {
	dir := os.Getenv("FAKE_DEVCLUSTER")
	if dir == "" {
		os.Exit(m.Run())
	}
	_ = os.WriteFile(filepath.Join(dir, "args"), []byte(strings.Join(os.Args[1:], "\n")), 0o644)
	if os.Getenv("FAKE_DEVCLUSTER_FAIL") != "" {
		fmt.Fprintln(os.Stderr, "fake devcluster: failing as asked")
		os.Exit(3)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	_ = os.WriteFile(filepath.Join(dir, "pid"), []byte(strconv.Itoa(os.Getpid())), 0o644)
	fmt.Println("ready kubeconfig=" + filepath.Join(dir, "kubeconfig"))
	got := <-sig
	_ = os.WriteFile(filepath.Join(dir, "signal"), []byte(got.String()), 0o644)
	os.Exit(0)
}

func TestParseArgs(t *testing.T) {
	o, err := parseArgs([]string{"--dir", "D", "--up", "/x/devcluster", "--bin", "B", "--", "--image", "*my/app*=/bin/app"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"up", "--dir", "D", "--bin", "B", "--image", "*my/app*=/bin/app"}
	if got := upCommand(o); !slices.Equal(got, want) {
		t.Fatalf("devcluster command = %q, want %q", got, want)
	}
	if o.PodSecurity != "restricted" {
		t.Errorf("default --pod-security = %q, want restricted", o.PodSecurity)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--", "--image", "a=b"}, "need --up"},
		{[]string{"--up", "dc", "--", "--dir=elsewhere"}, "use --dir"},
		{[]string{"--up", "dc", "--", "-bin", "x"}, "use --bin"},
		{[]string{"--nope"}, "not defined"},
		{[]string{"--pod-security", "strict"}, "want restricted"},
	} {
		_, err := parseArgs(tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseArgs(%q) = %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
}

// Ctrl-C (the context ending) interrupts devcluster, which stops, and
// is reported as a clean end, not an error: `go tool task dev` exits 0.
func TestInterruptIsACleanStop(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("FAKE_DEVCLUSTER", dir)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o := options{Dir: dir, Bin: "bin", UpArgs: []string{"--image", "a=b"}}
	wait, err := startCluster(ctx, os.Args[0], upCommand(o), log.New(io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	waited := false
	t.Cleanup(func() {
		if !waited { // a failed check: still stop the fake devcluster
			cancel()
			_ = wait()
		}
	})
	args, err := os.ReadFile(filepath.Join(dir, "args"))
	if err != nil || !strings.Contains(string(args), "--image\na=b") {
		t.Fatalf("devcluster got %q (%v), want the options after --", args, err)
	}
	cancel()
	waited = true
	if err := wait(); err != nil {
		t.Fatalf("an interrupted dev reported %v, want a clean stop", err)
	}
	if sig, err := os.ReadFile(filepath.Join(dir, "signal")); err != nil || string(sig) != "interrupt" {
		t.Fatalf("devcluster was not interrupted: %q, %v", sig, err)
	}
}

// devcluster down (go tool task dev:down) stops devcluster up, which exits
// 0: the foreground dev ends cleanly too, not with "exited: <nil>".
func TestDevclusterDownIsACleanStop(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("FAKE_DEVCLUSTER", dir)
	wait, err := startCluster(context.Background(), os.Args[0], []string{"up"}, log.New(io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(string(b))
	// What devcluster down does to the up process.
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := wait(); err != nil {
		t.Fatalf("dev after devcluster down reported %v, want a clean stop", err)
	}
}

func TestClusterThatFailsIsAnError(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("FAKE_DEVCLUSTER", dir)
	t.Setenv("FAKE_DEVCLUSTER_FAIL", "1")
	_, err := startCluster(context.Background(), os.Args[0], []string{"up"}, log.New(io.Discard))
	if err == nil || !strings.Contains(err.Error(), "exit status 3") {
		t.Fatalf("startCluster = %v, want devcluster's exit status", err)
	}
}
