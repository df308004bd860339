package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/charmbracelet/log"
)

// Bad command lines stop with a message saying what to do, before anything
// is built or sent.
func TestBadCommandLines(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{""}, `unknown subcommand ""`},
		{[]string{"publish"}, `unknown subcommand "publish"`},
		{[]string{"push"}, "no registry given"},
		{[]string{"push", "-registry", "Bad Registry"}, `registry "Bad Registry" is not a valid registry/prefix`},
		{[]string{"push", "-registry", "127.0.0.1:1/x", "-in", t.TempDir()}, "no OCI image layout in " + "%s" + " (build the images first: go tool task images)"},
		{[]string{"build", "-platforms", "windows/amd64"}, `platform "windows/amd64": want linux/<arch>`},
		{[]string{"layout", "-name", "x"}, "layout needs -name and at least one -bin"},
		{[]string{"layout", "-bin", "/bin/true"}, "layout needs -name and at least one -bin"},
		{[]string{"layout", "-name", "x", "-bin", "/bin/true", "-platform", "linux/amd64,linux/arm64"}, "give exactly one"},
		{[]string{"layout", "-name", "x", "-bin", "/bin/true", "-file", "/bin/busybox"}, `-file "/bin/busybox": want SRC=DEST`},
		{[]string{"layout", "-name", "x", "-bin", "/bin/true", "-link", "/bin/sh="}, `-link "/bin/sh=": want DEST=TARGET`},
	} {
		// %s stands for the layout folder of the last argument.
		want := strings.Replace(tc.want, "%s", tc.args[len(tc.args)-1]+"/tailplane-operator", 1)
		var stdout bytes.Buffer
		err := run(context.Background(), tc.args, &stdout, log.New(io.Discard))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("images %q: error %v, want %q", tc.args, err, want)
		}
		if stdout.Len() != 0 {
			t.Errorf("images %q printed %q", tc.args, stdout.String())
		}
	}
}
