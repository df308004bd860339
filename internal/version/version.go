// Package version is the version of Tailplane's binaries: the one a release
// build stamps (deploy/images links it in with -ldflags -X, the image's tag),
// else "dev" with the commit go build recorded.
//
// It imports only the standard library.
package version

import (
	"runtime/debug"
)

// stamped is set at link time: -ldflags '-X
// github.com/tailplane/tailplane/internal/version.stamped=v0.1.0'. A linker
// flag can only set a package variable; nothing writes it at run time.
var stamped string

// Symbol is the -X name deploy/images stamps.
const Symbol = "github.com/tailplane/tailplane/internal/version.stamped"

// String is the binary's version: the stamped one, else "dev", followed by
// the commit (12 digits, "-dirty" when the checkout had changes) when go
// build recorded one.
func String() string {
	v := stamped
	if v == "" {
		v = "dev"
	}
	if rev := revision(); rev != "" {
		v += " (" + rev + ")"
	}
	return v
}

func revision() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	var rev, dirty string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "-dirty"
			}
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev == "" {
		return ""
	}
	return rev + dirty
}
