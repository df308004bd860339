package cmdline

import (
	"bytes"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	u := Usage{Name: "bin", Summary: "does things", Env: []Var{{Name: "BIN_ADDR", Doc: "where"}}, Docs: "docs/bin.md"}
	cases := []struct {
		args     []string
		code     int
		done     bool
		out, err string
	}{
		{args: nil, done: false},
		{args: []string{"--help"}, code: 0, done: true, out: "BIN_ADDR  where"},
		{args: []string{"-h"}, code: 0, done: true, out: "docs/bin.md"},
		{args: []string{"--version"}, code: 0, done: true, out: "bin dev go1."},
		{args: []string{"--version=false"}, done: false},
		{args: []string{"--bogus"}, code: 2, done: true, err: "bin: flag provided but not defined: -bogus\nRun bin --help"},
		{args: []string{"serve"}, code: 2, done: true, err: `unexpected argument "serve"`},
	}
	for _, c := range cases {
		var out, errb bytes.Buffer
		code, done := Check(u, c.args, &out, &errb)
		if code != c.code || done != c.done || !strings.Contains(out.String(), c.out) || !strings.Contains(errb.String(), c.err) {
			t.Errorf("Check(%q) = %d, %v, stdout %q, stderr %q; want %d, %v, %q, %q", c.args, code, done, out.String(), errb.String(), c.code, c.done, c.out, c.err)
		}
	}
}
