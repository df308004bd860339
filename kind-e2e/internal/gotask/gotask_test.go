package gotask

import (
	"context"
	"slices"
	"testing"
)

func TestCommandRunsTheRunningTaskBinary(t *testing.T) {
	t.Setenv(ExeEnv, "/cache/task")
	cmd := Command(context.Background(), "dev", "DEV_DIR=/d")
	if want := []string{"/cache/task", "dev", "DEV_DIR=/d"}; cmd.Path != "/cache/task" || !slices.Equal(cmd.Args, want) {
		t.Fatalf("got %s %q, want /cache/task %q", cmd.Path, cmd.Args, want)
	}
}

func TestCommandFallsBackToGoToolTask(t *testing.T) {
	t.Setenv(ExeEnv, "")
	cmd := Command(context.Background(), "dev")
	if want := []string{"go", "tool", "task", "dev"}; !slices.Equal(cmd.Args, want) {
		t.Fatalf("got %q, want %q", cmd.Args, want)
	}
}
