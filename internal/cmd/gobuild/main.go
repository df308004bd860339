// Command gobuild runs `go build` and shows how far along it is: before the
// build it asks `go list` which packages are out of date, then counts them
// off as the compiler finishes each (go build -v names them), and says which
// package it is on and when it links. On a terminal that is one status line
// rewritten in place; elsewhere (CI, task's prefixed output) a line every
// tenth of the packages or every 30 seconds. The build's own output (errors,
// module downloads) passes through unchanged, and gobuild exits with the
// build's status.
//
//	go run ./internal/cmd/gobuild [-label NAME] -- [go build flags] [packages]
//
// The Taskfile builds through it: a first `go tool task dev` on an empty
// cache compiles for about ten minutes, which used to pass in silence.
//
// It imports charmbracelet/log and the standard library.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/charmbracelet/log"
)

func main() {
	label := flag.String("label", "", "what is being built, for the progress lines (default: the packages' last path elements)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: gobuild [-label NAME] -- [go build flags] [packages]\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	logger := log.NewWithOptions(os.Stderr, log.Options{Prefix: "gobuild"})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	code, err := run(ctx, flag.Args(), *label, os.Stderr, isTerminal(os.Stderr), logger)
	if err != nil {
		logger.Error("build failed to start", "err", err)
		os.Exit(2)
	}
	os.Exit(code)
}

// run builds args with go build -v, reporting to out, and returns go
// build's exit status.
func run(ctx context.Context, args []string, label string, out io.Writer, tty bool, logger *log.Logger) (int, error) {
	inv, err := parseBuildArgs(args)
	if err != nil {
		return 0, err
	}
	if label == "" {
		label = inv.defaultLabel()
	}
	start := time.Now()
	p := newProgress(label, start)
	logger.Info("building " + label)

	cmd := exec.CommandContext(ctx, "go", inv.buildArgs()...)
	cmd.Stdout = os.Stdout
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start go build: %w", err)
	}
	var mu sync.Mutex // p and out are used by the reader, the ticker and go list's answer
	status := &statusWriter{out: out, tty: tty}
	listCtx, cancelList := context.WithCancel(ctx)
	var background sync.WaitGroup
	defer background.Wait()
	defer cancelList()
	background.Add(2)
	compiling := make(chan struct{}) // closed at the first package line
	go func() {
		defer background.Done()
		// Only a build that compiles something is counted: an up-to-date
		// one ends in seconds, and go list beside it would slow it.
		select {
		case <-compiling:
		case <-listCtx.Done():
			return
		}
		libs, err := stalePackages(listCtx, inv)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case listCtx.Err() != nil: // the build ended first
		case err != nil:
			// Progress is a convenience: the build goes on without a total.
			status.clear()
			logger.Warn("cannot count the packages to compile", "err", err)
		default:
			p.setStale(libs)
			status.clear()
			logger.Info(fmt.Sprintf("building %s: %s to compile", label, packages(len(libs))))
		}
	}()
	go func() {
		defer background.Done()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-listCtx.Done():
				return
			case now := <-tick.C:
				mu.Lock()
				if line, ok := p.report(now, tty); ok {
					status.show(line, logger)
				}
				mu.Unlock()
			}
		}
	}()
	started := false
	sc := bufio.NewScanner(stderr)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		mu.Lock()
		if p.compiled(line) {
			if !started {
				started = true
				close(compiling)
			}
		} else {
			status.clear()
			fmt.Fprintln(out, line)
		}
		mu.Unlock()
	}
	err = cmd.Wait()
	cancelList()
	mu.Lock()
	defer mu.Unlock()
	status.clear()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		logger.Error(fmt.Sprintf("building %s failed after %s", label, time.Since(start).Round(time.Second)))
		return exit.ExitCode(), nil
	case err != nil:
		return 0, fmt.Errorf("go build: %w", err)
	}
	logger.Info(fmt.Sprintf("built %s in %s (%s compiled)", label, time.Since(start).Round(time.Second), packages(p.done)))
	return 0, nil
}

// statusWriter shows progress: on a terminal one line rewritten in place,
// elsewhere a log line.
type statusWriter struct {
	out   io.Writer
	tty   bool
	shown bool // a status line is on the terminal
}

func (s *statusWriter) show(line string, logger *log.Logger) {
	if !s.tty {
		logger.Info(line)
		return
	}
	fmt.Fprint(s.out, "\r\x1b[K"+line)
	s.shown = true
}

// clear removes the status line so that other output starts at column 0.
func (s *statusWriter) clear() {
	if s.shown {
		fmt.Fprint(s.out, "\r\x1b[K")
		s.shown = false
	}
}

// stalePackages asks go list which libraries the build would compile.
func stalePackages(ctx context.Context, inv invocation) (map[string]bool, error) {
	args := inv.listArgs()
	cmd := exec.CommandContext(ctx, "go", args...)
	var errb strings.Builder
	cmd.Stderr = &errb // go build reports the same problems
	outb, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	libs := map[string]bool{}
	for _, line := range strings.Split(string(outb), "\n") {
		if name, path, ok := strings.Cut(line, " "); ok && name != "main" {
			libs[path] = true
		}
	}
	return libs, nil
}

// isTerminal reports whether f is a terminal (a character device).
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
