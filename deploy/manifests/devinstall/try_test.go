package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The try-steps fit the cluster folder's control server: on devcluster's
// own, names in devcluster.ts.net, the seed's Ingress over HTTPS and the
// ProxyGroups; on Headscale, names in its MagicDNS domain, the Ingress as
// plain HTTP (http-endpoint), the headscale CLI, and nothing that needs
// certificates, Tailscale Services or devcluster's ACME. Every go tool
// task command names a custom folder (DEV_DIR); the default folder needs
// none.
func TestTryTextFitsControlServerAndFolder(t *testing.T) {
	custom := t.TempDir()
	writeEnv := func(lines ...string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(custom, "tailnet.env"), []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	writeEnv("TS_CONTROL_URL=http://127.0.0.1:1", "TS_MAGICDNS_DOMAIN=devcluster.ts.net")
	dev := tryText(custom)
	for _, want := range []string{
		"go tool task dev:kubectl DEV_DIR=" + custom + " -- apply -f kind-e2e/operator/testdata/echo.yaml",
		"devcluster curl --dir " + custom + " https://my-app.devcluster.ts.net/",
		"examples/seed/07-proxygroup.yaml",
		"go tool task dev:join DEV_DIR=" + custom,
		"devcluster's ACME directory",
		"apiServerProxyConfig: {mode: \"noauth\"} in\n  # " + custom + "/values.yaml",
		"--server=https://tailscale-operator.devcluster.ts.net",
	} {
		if !strings.Contains(dev, want) {
			t.Errorf("devcluster's try-steps lack %q:\n%s", want, dev)
		}
	}
	checkKubectlLines(t, dev, " DEV_DIR="+custom+" --")

	writeEnv("TS_CONTROL=headscale", "TS_CONTROL_URL=http://127.0.0.1:2", "TS_MAGICDNS_DOMAIN=headscale.devcluster.test",
		"HEADSCALE_URL=http://127.0.0.1:2", "HEADSCALE_CONFIG="+custom+"/headscale/config.yaml")
	hs := tryText(custom)
	for _, want := range []string{
		"on Headscale",
		"go tool task dev:kubectl DEV_DIR=" + custom + " -- annotate ingress my-app tailscale.com/http-endpoint=enabled",
		"devcluster curl --dir " + custom + " http://my-app.headscale.devcluster.test/",
		"devcluster curl --dir " + custom + " http://default-postgres.headscale.devcluster.test:5432/",
		"headscale -c " + custom + "/headscale/config.yaml nodes list",
	} {
		if !strings.Contains(hs, want) {
			t.Errorf("Headscale's try-steps lack %q:\n%s", want, hs)
		}
	}
	for _, unwanted := range []string{"ts.net", "https://", "07-proxygroup", "kube-apiserver.yaml", "ACME", "Pebble"} {
		if strings.Contains(hs, unwanted) {
			t.Errorf("Headscale's try-steps name %q, which Headscale lacks:\n%s", unwanted, hs)
		}
	}
	checkKubectlLines(t, hs, " DEV_DIR="+custom+" --")

	// The default folder (.devcluster in the working directory, as go
	// tool task runs it) needs no DEV_DIR.
	wd := t.TempDir()
	t.Chdir(wd)
	def := filepath.Join(wd, ".devcluster")
	if err := os.Mkdir(def, 0o755); err != nil {
		t.Fatal(err)
	}
	checkKubectlLines(t, tryText(def), " --")
	if got := tryText(def); strings.Contains(got, "DEV_DIR") {
		t.Errorf("the default folder's try-steps set DEV_DIR:\n%s", got)
	}
}

// checkKubectlLines checks that every dev:kubectl command in text is
// followed by args.
func checkKubectlLines(t *testing.T, text, args string) {
	t.Helper()
	n := 0
	for line := range strings.Lines(text) {
		if _, rest, ok := strings.Cut(line, "go tool task dev:kubectl"); ok {
			n++
			if !strings.HasPrefix(rest, args+" ") {
				t.Errorf("%q: want dev:kubectl%s", strings.TrimSpace(line), args)
			}
		}
	}
	if n == 0 {
		t.Errorf("no dev:kubectl line in:\n%s", text)
	}
}
