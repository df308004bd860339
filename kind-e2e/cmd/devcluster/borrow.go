package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// borrowTailnet makes the cluster in abs a second cluster on the tailnet of
// the devcluster in from (`up --tailnet-from`), as a user joins a second
// Kubernetes cluster to a tailnet: it starts no control server, DERP or
// ACME server of its own, and writes D/tailnet.env, D/ca.pem and
// D/acme-ca.pem from from's, with the file paths its own. Both operators
// log in with the same OAuth client. It returns tailnet.env's path.
//
// The process node only: its pods are host processes that read the ACME
// server's CA from this folder (TS_POD_ACME_CA_FILE) and reach from's
// servers wherever they listen; the real node's containers would need
// from's CA in their service-account bundle.
func borrowTailnet(abs, from string) (string, error) {
	src, err := filepath.Abs(from)
	if err != nil {
		return "", err
	}
	if src == abs {
		return "", errors.New("--tailnet-from names this cluster's own folder")
	}
	if livePID(src) == 0 {
		return "", fmt.Errorf("--tailnet-from %s: no devcluster runs there (start it first: devcluster up --dir %s)", from, from)
	}
	env, err := os.ReadFile(filepath.Join(src, "tailnet.env"))
	if err != nil {
		return "", fmt.Errorf("--tailnet-from %s: %w", from, err)
	}
	own := map[string]string{
		"TS_ACME_CA_FILE":     filepath.Join(abs, "acme-ca.pem"),
		"TS_POD_ACME_CA_FILE": filepath.Join(abs, "acme-ca.pem"),
		"TS_CA_FILE":          filepath.Join(abs, "ca.pem"),
	}
	lines := []string{"# The tailnet of the devcluster in " + src + " (up --tailnet-from): this cluster joins it."}
	for _, l := range strings.Split(strings.TrimRight(string(env), "\n"), "\n") {
		if k, _, ok := strings.Cut(l, "="); ok && own[k] != "" {
			l = k + "=" + own[k]
		}
		lines = append(lines, l)
	}
	for _, f := range []string{"ca.pem", "acme-ca.pem"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			return "", fmt.Errorf("--tailnet-from %s: %w", from, err)
		}
		if err := os.WriteFile(filepath.Join(abs, f), b, 0o644); err != nil {
			return "", err
		}
	}
	path := filepath.Join(abs, "tailnet.env")
	return path, os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600)
}

// livePID is the process of the devcluster that runs for the folder dir
// (its devcluster.pid, if that process lives), 0 for none.
func livePID(dir string) int {
	b, err := os.ReadFile(filepath.Join(dir, "devcluster.pid"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return 0
	}
	return pid
}
