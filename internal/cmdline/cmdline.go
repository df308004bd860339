// Package cmdline answers the command line of Tailplane's binaries. They are
// configured by environment variables and take no arguments of their own:
// --help prints the usage with the variables they read, --version the
// version, and anything else is refused with exit status 2 (as the flag
// package does), so that `kubectl exec <pod> -- tailplane-proxy --help`
// never starts a second instance inside the pod.
//
// It imports the standard library and internal/version.
package cmdline

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime"
	"strings"
	"text/tabwriter"

	"github.com/tailplane/tailplane/internal/version"
)

// Var is one environment variable a binary reads.
type Var struct {
	Name string
	Doc  string // one line: meaning and default
}

// Usage describes a binary for --help.
type Usage struct {
	Name    string // the binary's name
	Summary string // what it does, one sentence
	Extra   string // further usage lines (subcommands); may be empty
	Env     []Var  // the environment variables it reads
	// Docs names where the settings are described in full.
	Docs string
}

// Exit statuses.
const (
	ExitOK    = 0
	ExitUsage = 2 // a bad command line, as the flag package's
)

// Check reads args (the command line without the program name). done means
// the process must exit now with code: after --help or --version (0, the
// answer on stdout) or on anything it does not know (2, the reason on
// stderr). Otherwise the binary runs.
func Check(u Usage, args []string, stdout, stderr io.Writer) (code int, done bool) {
	fs := flag.NewFlagSet(u.Name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // the messages below are ours
	showVersion := fs.Bool("version", false, "print the version and exit")
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		u.Write(stdout)
		return ExitOK, true
	case err != nil:
		fmt.Fprintf(stderr, "%s: %v\nRun %s --help for the usage.\n", u.Name, err, u.Name)
		return ExitUsage, true
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "%s: unexpected argument %q: settings come from environment variables\nRun %s --help for the usage.\n", u.Name, fs.Arg(0), u.Name)
		return ExitUsage, true
	case *showVersion:
		fmt.Fprintln(stdout, VersionLine(u.Name))
		return ExitOK, true
	}
	return 0, false
}

// VersionLine is what --version prints: the name, the version and the Go
// release it was built with.
func VersionLine(name string) string {
	return fmt.Sprintf("%s %s %s", name, version.String(), runtime.Version())
}

// Write prints the usage.
func (u Usage) Write(w io.Writer) {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s\n\nUsage:\n  %s            run (settings from the environment below)\n", u.Name, u.Summary, u.Name)
	if u.Extra != "" {
		b.WriteString(u.Extra)
		if !strings.HasSuffix(u.Extra, "\n") {
			b.WriteString("\n")
		}
	}
	fmt.Fprintf(&b, "  %s --help     print this and exit\n  %s --version  print the version and exit\n\nEnvironment:\n", u.Name, u.Name)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, v := range u.Env {
		fmt.Fprintf(tw, "  %s\t%s\n", v.Name, v.Doc)
	}
	tw.Flush()
	if u.Docs != "" {
		fmt.Fprintf(&b, "\n%s\n", u.Docs)
	}
	io.WriteString(w, b.String())
}
