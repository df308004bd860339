package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tailplane/tailplane/internal/tailnet/tailnettest"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func writeCreds(t *testing.T, id, secret string) (string, string) {
	dir := t.TempDir()
	idFile, secretFile := filepath.Join(dir, "client_id"), filepath.Join(dir, "client_secret")
	if err := os.WriteFile(idFile, []byte(id+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(secretFile, []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	return idFile, secretFile
}

// Missing, empty or rejected credentials stop the operator at startup with
// one line saying which.
func TestStartupFailsFastOnCredentials(t *testing.T) {
	api := tailnettest.NewServer()
	defer api.Close()
	goodID, goodSecret := writeCreds(t, tailnettest.ClientID, tailnettest.ClientSecret)
	badID, badSecret := writeCreds(t, tailnettest.ClientID, "wrong-secret")
	_, emptySecret := writeCreds(t, tailnettest.ClientID, "  ")
	cases := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"missing file", map[string]string{"CLIENT_ID_FILE": "/nonexistent/client_id", "CLIENT_SECRET_FILE": goodSecret}, "/nonexistent/client_id"},
		{"empty secret", map[string]string{"CLIENT_ID_FILE": goodID, "CLIENT_SECRET_FILE": emptySecret}, "is empty"},
		{"rejected", map[string]string{"CLIENT_ID_FILE": badID, "CLIENT_SECRET_FILE": badSecret}, "rejected the OAuth client credentials"},
		{"bad tags", map[string]string{"CLIENT_ID_FILE": goodID, "CLIENT_SECRET_FILE": goodSecret, "PROXY_TAGS": "k8s"}, `PROXY_TAGS: invalid tag "k8s"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.env["OPERATOR_NAMESPACE"] = "tailscale"
			tc.env["OPERATOR_LOGIN_SERVER"] = api.URL
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err := run(ctx, envOf(tc.env), io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("got %v, want one line containing %q", err, tc.want)
			}
		})
	}
}

func TestRuntimeSettingsDefaultToPodIP(t *testing.T) {
	rs, err := runtimeSettings(envOf(map[string]string{"POD_IP": "10.1.2.3", "POD_NAME": "operator-0"}), "tailscale", nil)
	if err != nil {
		t.Fatal(err)
	}
	if rs.HealthAddress != "10.1.2.3:8081" || rs.MetricsAddress != "10.1.2.3:8080" {
		t.Fatalf("addresses %q %q", rs.HealthAddress, rs.MetricsAddress)
	}
	if rs.LeaderElection == nil || rs.LeaderElection.Identity != "operator-0" || rs.LeaderElection.Namespace != "tailscale" {
		t.Fatalf("leader election %+v", rs.LeaderElection)
	}
	if _, err := runtimeSettings(envOf(map[string]string{"TAILPLANE_LEADER_ELECTION": "maybe"}), "tailscale", nil); err == nil {
		t.Fatal("bad boolean accepted")
	}
}
