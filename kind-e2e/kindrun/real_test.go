package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The real Host's background command: ready once its line is printed,
// stopped by SIGINT, its output in the log. The trap is set before the
// ready line: SIGINT may come as soon as that line is read.
func TestStartAndStop(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "log")
	script := `trap 'echo stopped; exit 0' INT; echo starting; echo "ready tailnet=x"; while :; do sleep 0.05; done`
	stop, err := dockerHost{}.Start(context.Background(), Command{Dir: dir, Log: log, Args: []string{"sh", "-c", script}}, "ready ")
	if err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(log)
	if !strings.Contains(string(b), "ready tailnet=x") || !strings.Contains(string(b), "stopped") {
		t.Errorf("log %q", b)
	}

	_, err = dockerHost{}.Start(context.Background(), Command{Dir: dir, Log: log, Args: []string{"sh", "-c", "exit 3"}}, "ready ")
	if err == nil || !strings.Contains(err.Error(), "exited before it was ready") {
		t.Errorf("err = %v", err)
	}
}

func TestRunCommand(t *testing.T) {
	dir := t.TempDir()
	err := dockerHost{}.Run(context.Background(), Command{Dir: dir, Env: []string{"E2E_KIND_TEST=1"}, Args: []string{"sh", "-c", `test "$E2E_KIND_TEST" = 1 && touch here`}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "here")); err != nil {
		t.Error(err)
	}
	if err := (dockerHost{}).Run(context.Background(), Command{Dir: dir, Args: []string{"false"}}); err == nil {
		t.Error("false: no error")
	}
}
