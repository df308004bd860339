package config

import (
	"strings"
	"testing"
)

func TestAPIServerSectionIsValidated(t *testing.T) {
	good := `{"version":"v1alpha1","hostname":"api-0","role":"kube-apiserver","apiServer":{"mode":"noauth",
		"serviceName":"svc:k8s-api","tls":{"mode":"shared","secretName":"k8s-api-tls","issue":true}}}`
	cfg, err := Parse([]byte(good))
	if err != nil {
		t.Fatalf("valid kube-apiserver config refused: %v", err)
	}
	if cfg.APIServer.EffectiveMode() != APIServerNoAuth || !cfg.APIServer.TLS.Issue {
		t.Fatalf("parsed %+v", cfg.APIServer)
	}
	noMode := `{"version":"v1alpha1","hostname":"api-0","role":"kube-apiserver","apiServer":{
		"serviceName":"svc:k8s-api","tls":{"mode":"shared","secretName":"k8s-api-tls"}}}`
	if cfg, err := Parse([]byte(noMode)); err != nil || cfg.APIServer.EffectiveMode() != APIServerAuth {
		t.Fatalf("mode defaults to auth: %v", err)
	}
	bad := `{"version":"v1alpha1","hostname":"api-0","role":"kube-apiserver","apiServer":{"mode":"open",
		"serviceName":"k8s-api","tls":{"mode":"tailscale-cert"}},"group":{}}`
	_, err = Parse([]byte(bad))
	if err == nil {
		t.Fatal("bad kube-apiserver config accepted")
	}
	for _, want := range []string{
		`apiServer.mode: unknown mode "open" (want "auth" or "noauth")`,
		`apiServer.serviceName: "k8s-api" is not a Tailscale Service name`,
		`apiServer.tls.mode: must be "shared"`,
		`apiServer.tls.secretName: is required`,
		`group: must be empty for role "kube-apiserver"`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if _, err := Parse([]byte(`{"version":"v1alpha1","hostname":"api-0","role":"kube-apiserver"}`)); err == nil || !strings.Contains(err.Error(), "apiServer: is required") {
		t.Errorf("missing apiServer section: %v", err)
	}
}
