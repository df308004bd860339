package main

import (
	"fmt"
	"path"
	"strings"
	"time"
)

// invocation is what gobuild needs of go build's arguments.
type invocation struct {
	// chdir is -C and its folder, which go requires as the first flag.
	chdir []string
	// rest are go build's arguments but chdir.
	rest []string
	// listFlags are the flags that change which packages go list sees
	// (-C, -tags, -mod), in go build's order.
	listFlags []string
	// packages are the package patterns.
	packages []string
}

// takesValue reports whether go build's flag name takes a value as the
// next argument.
func takesValue(name string) bool {
	switch name {
	case "-C", "-o", "-p", "-ldflags", "-gcflags", "-asmflags", "-tags", "-mod", "-modfile", "-pgo",
		"-overlay", "-toolexec", "-installsuffix", "-buildmode", "-compiler", "-gccgoflags", "-pkgdir",
		"-coverpkg", "-covermode":
		return true
	}
	return false
}

// forList reports whether go list takes the flag name as go build does
// (those that change which packages it sees; -C is kept apart).
func forList(name string) bool {
	switch name {
	case "-tags", "-mod", "-modfile", "-overlay":
		return true
	}
	return false
}

// parseBuildArgs splits go build's arguments into the flags go list needs
// and the packages.
func parseBuildArgs(args []string) (invocation, error) {
	var inv invocation
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			inv.rest = append(inv.rest, args[i:]...)
			inv.packages = append(inv.packages, args[i+1:]...)
			break
		}
		if !strings.HasPrefix(a, "-") {
			inv.rest = append(inv.rest, a)
			inv.packages = append(inv.packages, a)
			continue
		}
		name, _, hasValue := strings.Cut(strings.Replace(a, "--", "-", 1), "=")
		flag := []string{a}
		if !hasValue && takesValue(name) {
			if i+1 == len(args) {
				return invocation{}, fmt.Errorf("flag %s needs a value", a)
			}
			i++
			flag = append(flag, args[i])
		}
		switch {
		case name == "-C":
			inv.chdir = flag
		case forList(name):
			inv.listFlags = append(inv.listFlags, flag...)
			inv.rest = append(inv.rest, flag...)
		default:
			inv.rest = append(inv.rest, flag...)
		}
	}
	if len(inv.packages) == 0 {
		inv.packages = []string{"."}
	}
	return inv, nil
}

// defaultLabel names the build by its packages' last path elements.
func (inv invocation) defaultLabel() string {
	names := make([]string, len(inv.packages))
	for i, p := range inv.packages {
		names[i] = path.Base(strings.TrimSuffix(p, "/..."))
	}
	return strings.Join(names, ", ")
}

// progress counts compiled packages against those go list said are stale.
type progress struct {
	label string
	stale map[string]bool
	start time.Time
	done  int    // stale packages compiled so far
	last  string // the package compiled last

	reported     time.Time // when the last non-terminal line was written
	reportedDone int       // done at that line
}

func newProgress(label string, stale map[string]bool, start time.Time) *progress {
	return &progress{label: label, stale: stale, start: start, reported: start}
}

// compiled records line of go build -v's output: true when it names a
// package being compiled (a line of its own, not passed on to the user).
func (p *progress) compiled(line string) bool {
	if !p.stale[line] {
		return false
	}
	delete(p.stale, line)
	p.done++
	p.last = line
	return true
}

// total is the number of packages to compile.
func (p *progress) total() int { return p.done + len(p.stale) }

// report is the progress line at now, and whether to show it: on a
// terminal always; elsewhere when a tenth of the packages or 30 seconds
// have passed since the last line.
func (p *progress) report(now time.Time, tty bool) (string, bool) {
	if !tty {
		step := max(p.total()/10, 1)
		if p.done-p.reportedDone < step && now.Sub(p.reported) < 30*time.Second {
			return "", false
		}
		p.reported, p.reportedDone = now, p.done
	}
	elapsed := now.Sub(p.start).Round(time.Second)
	switch {
	case p.total() == 0 || len(p.stale) == 0 && p.done > 0:
		return fmt.Sprintf("building %s: linking (%s)", p.label, elapsed), true
	case p.done == 0:
		return fmt.Sprintf("building %s: 0/%d packages (%s)", p.label, p.total(), elapsed), true
	}
	return fmt.Sprintf("building %s: %d/%d packages, %d%% (%s), last %s",
		p.label, p.done, p.total(), 100*p.done/p.total(), elapsed, p.last), true
}

// buildArgs are go build's arguments with -v: -C first, as go requires.
func (inv invocation) buildArgs() []string {
	return append(append(append([]string{"build"}, inv.chdir...), "-v"), inv.rest...)
}

// listArgs are go list's arguments printing the import path of each package
// the build would compile.
func (inv invocation) listArgs() []string {
	args := append([]string{"list"}, inv.chdir...)
	args = append(args, "-deps", "-f", "{{if .Stale}}{{.ImportPath}}{{end}}")
	return append(append(args, inv.listFlags...), inv.packages...)
}
