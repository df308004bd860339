package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/charmbracelet/log"

	"github.com/tailplane/tailplane/handlers/lib/settings"
	"github.com/tailplane/tailplane/internal/tslog"
)

// `kubectl exec <operator> -- tailplane-operator --version` (or --help, or
// a typo) answers and exits: it never starts a second operator. The
// environment here would start one, and fail (no namespace, no
// credentials), with exit status 1.
func TestFlagsAnswerWithoutStartingAnOperator(t *testing.T) {
	getenv := func(string) string { return "" }
	cases := []struct {
		args     []string
		code     int
		out, err string
	}{
		{args: []string{"--help"}, code: 0, out: "OPERATOR_LOGGING"},
		{args: []string{"-help"}, code: 0, out: "TAILPLANE_LOG_FORMAT"},
		{args: []string{"--version"}, code: 0, out: "tailplane-operator dev"},
		{args: []string{"--namespace=x"}, code: 2, err: "flag provided but not defined: -namespace"},
		{args: []string{"start"}, code: 2, err: `unexpected argument "start"`},
	}
	for _, c := range cases {
		var stdout, stderr bytes.Buffer
		code := mainExit(c.args, getenv, &stdout, &stderr)
		if code != c.code || !strings.Contains(stdout.String(), c.out) || !strings.Contains(stderr.String(), c.err) {
			t.Errorf("tailplane-operator %s: exit %d, stdout %q, stderr %q; want exit %d, stdout with %q, stderr with %q",
				strings.Join(c.args, " "), code, stdout.String(), stderr.String(), c.code, c.out, c.err)
		}
		if c.code == 0 && stderr.Len() > 0 {
			t.Errorf("tailplane-operator %s wrote %q to stderr: did it start?", strings.Join(c.args, " "), stderr.String())
		}
	}
}

// --help names every environment variable the operator reads.
func TestUsageNamesEveryVariable(t *testing.T) {
	read := map[string]bool{}
	getenv := func(k string) string { read[k] = true; return "" }
	_, _ = settings.FromEnv(getenv)
	_, _ = tslog.FromEnv(getenv)
	_, _ = runtimeSettings(getenv, "ns", log.New(new(bytes.Buffer)))
	_, _ = apiServerProxyMode(getenv)
	_, _ = deviceWanted(getenv)
	// run's and deviceFromEnv's own reads.
	for _, k := range []string{envKubeconfig, envKubeQPS, envWatchNamespace, envDeviceTimeout, envTempDir} {
		read[k] = true
	}
	var help bytes.Buffer
	usage.Write(&help)
	for name := range read {
		if !strings.Contains(help.String(), name) {
			t.Errorf("--help does not name %s, which the operator reads", name)
		}
	}
	if len(read) < 25 {
		t.Fatalf("only %d variables read: %v", len(read), read)
	}
}
