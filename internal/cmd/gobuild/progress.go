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

// progress counts the packages go build -v names as it compiles them.
// The total is the libraries go list calls stale, known once go list
// answers (it runs beside the build once the first package compiles:
// before it, every build would wait seconds for it). Main packages are compiled last and not counted: go
// list calls them stale whenever their binary is not installed.
type progress struct {
	label string
	start time.Time
	seen  map[string]bool // every package line so far
	last  string          // the package compiled last
	stale map[string]bool // nil until go list answers
	done  int             // packages seen: of stale, once known

	reported     time.Time // when the last non-terminal line was written
	reportedDone int       // done at that line
}

func newProgress(label string, start time.Time) *progress {
	return &progress{label: label, start: start, seen: map[string]bool{}, reported: start}
}

// isPackageLine reports whether line of go build -v's output names a
// package: an import path has no spaces or colons, which every error,
// position and "go: downloading" line has; "# pkg" heads a package's
// errors.
func isPackageLine(line string) bool {
	return line != "" && !strings.ContainsAny(line, " :\t") && !strings.HasPrefix(line, "#")
}

// compiled records line of go build -v's output: true when it names a
// package being compiled (a line of its own, not passed on to the user).
func (p *progress) compiled(line string) bool {
	if !isPackageLine(line) {
		return false
	}
	if !p.seen[line] {
		p.seen[line] = true
		if p.stale == nil || p.stale[line] {
			p.done++
		}
	}
	p.last = line
	return true
}

// setStale records go list's answer: the libraries to compile.
func (p *progress) setStale(libs map[string]bool) {
	p.stale, p.done = libs, 0
	for pkg := range p.seen {
		if libs[pkg] {
			p.done++
		}
	}
}

// total is the number of packages to compile, -1 until go list answers.
func (p *progress) total() int {
	if p.stale == nil {
		return -1
	}
	return len(p.stale)
}

// report is the progress line at now, and whether to show it: on a
// terminal always; elsewhere when a tenth of the packages or 30 seconds
// have passed since the last line.
func (p *progress) report(now time.Time, tty bool) (string, bool) {
	total := p.total()
	if !tty {
		step := max(total/10, 1)
		if total < 0 {
			step = 100
		}
		if p.done-p.reportedDone < step && now.Sub(p.reported) < 30*time.Second {
			return "", false
		}
		p.reported, p.reportedDone = now, p.done
	}
	elapsed := now.Sub(p.start).Round(time.Second)
	switch {
	case total < 0:
		return fmt.Sprintf("building %s: %s compiled (%s), counting what is left", p.label, packages(p.done), elapsed), true
	case p.done >= total:
		return fmt.Sprintf("building %s: linking (%s)", p.label, elapsed), true
	case p.done == 0:
		return fmt.Sprintf("building %s: 0/%d packages (%s)", p.label, total, elapsed), true
	}
	return fmt.Sprintf("building %s: %d/%d packages, %d%% (%s), last %s",
		p.label, p.done, total, 100*p.done/total, elapsed, p.last), true
}

// buildArgs are go build's arguments with -v: -C first, as go requires.
func (inv invocation) buildArgs() []string {
	return append(append(append([]string{"build"}, inv.chdir...), "-v"), inv.rest...)
}

// listArgs are go list's arguments printing the import path of each package
// the build would compile.
func (inv invocation) listArgs() []string {
	args := append([]string{"list"}, inv.chdir...)
	args = append(args, "-deps", "-f", "{{if .Stale}}{{.Name}} {{.ImportPath}}{{end}}")
	return append(append(args, inv.listFlags...), inv.packages...)
}

// packages is "1 package" or "n packages".
func packages(n int) string {
	if n == 1 {
		return "1 package"
	}
	return fmt.Sprintf("%d packages", n)
}
