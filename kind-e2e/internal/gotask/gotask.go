// Package gotask starts the repository's task runner for the suites, which
// run `go tool task dev` and other tasks as a user would.
//
// Under `go tool task test` it runs the very task binary that started the
// suite: the Taskfile exports its path as TAILPLANE_TASK_EXE. `go tool task`
// would compile task a second time whenever the build flags the Taskfile
// sets (GOFLAGS, CGO_ENABLED) differ from the shell's, as they do in the
// suites' environment. Started any other way, a suite runs `go tool task`.
//
// It imports only the standard library.
package gotask

import (
	"context"
	"os"
	"os/exec"
)

// ExeEnv names the environment variable that holds the running task
// binary's path (Taskfile.yml sets it from TASK_EXE).
const ExeEnv = "TAILPLANE_TASK_EXE"

// Command returns a command that runs task with args, killed when ctx ends.
func Command(ctx context.Context, args ...string) *exec.Cmd {
	if exe := os.Getenv(ExeEnv); exe != "" {
		return exec.CommandContext(ctx, exe, args...)
	}
	return exec.CommandContext(ctx, "go", append([]string{"tool", "task"}, args...)...)
}
