package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/charmbracelet/log"

	"github.com/tailplane/tailplane/internal/tslog"
)

// `kubectl exec <proxy> -- tailplane-proxy --help` (or --version, or a
// typo) answers and exits: it never starts a second proxy in the pod. The
// environment here would start one, and fail (no config source), with exit
// status 1.
func TestFlagsAnswerWithoutStartingAProxy(t *testing.T) {
	getenv := func(string) string { return "" }
	cases := []struct {
		args       []string
		code       int
		out, err   string
		notStarted string
	}{
		{args: []string{"--help"}, code: 0, out: "TAILPLANE_CONFIG_SECRET"},
		{args: []string{"-h"}, code: 0, out: "tailplane-proxy nameserver"},
		{args: []string{"--version"}, code: 0, out: "tailplane-proxy dev"},
		{args: []string{"--verbose"}, code: 2, err: "flag provided but not defined: -verbose"},
		{args: []string{"run"}, code: 2, err: `unexpected argument "run"`},
		{args: []string{"nameserver", "--help"}, code: 0, out: "-records"},
		{args: []string{"nameserver", "--port=53"}, code: 2, err: "flag provided but not defined: -port"},
		{args: []string{"nameserver", "extra"}, code: 2, err: `unexpected argument "extra"`},
	}
	for _, c := range cases {
		var stdout, stderr bytes.Buffer
		code := mainExit(c.args, getenv, &stdout, &stderr)
		if code != c.code || !strings.Contains(stdout.String(), c.out) || !strings.Contains(stderr.String(), c.err) {
			t.Errorf("tailplane-proxy %s: exit %d, stdout %q, stderr %q; want exit %d, stdout with %q, stderr with %q",
				strings.Join(c.args, " "), code, stdout.String(), stderr.String(), c.code, c.out, c.err)
		}
		if c.code == 0 && stderr.Len() > 0 {
			t.Errorf("tailplane-proxy %s logged %q: did it start?", strings.Join(c.args, " "), stderr.String())
		}
	}
}

// --help names every environment variable the proxy reads.
func TestUsageNamesEveryVariable(t *testing.T) {
	read := map[string]bool{}
	record := func(env map[string]string) func(string) string {
		return func(k string) string { read[k] = true; return env[k] }
	}
	cfg := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(cfg, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	logger := log.New(new(bytes.Buffer))
	if _, err := tslog.FromEnv(record(nil)); err != nil {
		t.Fatal(err)
	}
	if _, err := optionsFromEnv(t.Context(), record(map[string]string{envConfigFile: cfg, envStateDir: t.TempDir()}), logger); err != nil {
		t.Fatal(err)
	}
	// With a state Secret it reaches the Kubernetes client's settings.
	_, _ = optionsFromEnv(t.Context(), record(map[string]string{envConfigFile: cfg, envStateDir: t.TempDir(), envStateSecret: "s", envKubeconfig: "/nonexistent"}), logger)
	var help bytes.Buffer
	usage.Write(&help)
	for name := range read {
		if !strings.Contains(help.String(), name) {
			t.Errorf("--help does not name %s, which the proxy reads", name)
		}
	}
	if len(read) < 10 {
		t.Fatalf("only %d variables read: %v", len(read), read)
	}
}
