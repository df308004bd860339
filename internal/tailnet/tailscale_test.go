package tailnet_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tailplane/tailplane/internal/tailnet"
	"github.com/tailplane/tailplane/internal/tailnet/tailnettest"
)

func newBackend(t *testing.T) (*tailnet.Tailscale, *tailnettest.Server) {
	t.Helper()
	srv := tailnettest.NewServer()
	t.Cleanup(srv.Close)
	// A trailing slash must not matter: the login server is the API base.
	b, err := tailnet.NewTailscale(tailnet.Options{LoginServer: srv.URL + "/", ClientID: tailnettest.ClientID, ClientSecret: tailnettest.ClientSecret})
	if err != nil {
		t.Fatal(err)
	}
	return b, srv
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestCreateAuthKeySendsTheRequestedCapabilities(t *testing.T) {
	b, srv := newBackend(t)
	key, err := b.CreateAuthKey(ctx(t), []string{"tag:k8s", "tag:db"}, true, false, false)
	if err != nil {
		t.Fatal(err)
	}
	got := srv.Keys()
	if len(got) != 1 || got[0].Key != key || !strings.HasPrefix(key, "tskey-auth-") {
		t.Fatalf("key %q, server saw %+v", key, got)
	}
	want := tailnettest.KeyRequest{Tags: []string{"tag:k8s", "tag:db"}, Preauthorized: true, Key: key, ID: got[0].ID}
	if got[0].ID == "" || !reflect.DeepEqual(got[0], want) {
		t.Fatalf("server saw %+v, want %+v", got[0], want)
	}
	if _, err := b.CreateAuthKey(ctx(t), []string{"tag:x"}, false, true, true); err != nil {
		t.Fatal(err)
	}
	if k := srv.Keys()[1]; k.Preauthorized || !k.Reusable || !k.Ephemeral {
		t.Fatalf("flags not passed through: %+v", k)
	}
}

// A minted key comes back with its ID and description; the list shows it
// (without its secret) until it is revoked, marks it invalid once a device
// used it, and revoking a key twice is not an error.
func TestMintListAndRevokeAuthKeys(t *testing.T) {
	b, srv := newBackend(t)
	before := time.Now().Add(-time.Minute)
	k, err := b.MintAuthKey(ctx(t), tailnet.KeyRequest{Tags: []string{"tag:k8s"}, Preauthorized: true, Description: "tailplane ts-web-0123abcd"})
	if err != nil {
		t.Fatal(err)
	}
	if k.ID == "" || !strings.HasPrefix(k.Key, "tskey-auth-") || k.Description != "tailplane ts-web-0123abcd" || k.Created.Before(before) {
		t.Fatalf("minted %+v", k)
	}
	if got := srv.Keys(); len(got) != 1 || got[0].Description != k.Description || got[0].ID != k.ID {
		t.Fatalf("server saw %+v", got)
	}
	used, err := b.MintAuthKey(ctx(t), tailnet.KeyRequest{Tags: []string{"tag:k8s"}, Description: "other"})
	if err != nil {
		t.Fatal(err)
	}
	srv.UseKey(used.Key)
	list, err := b.ListAuthKeys(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 {
		t.Fatalf("listed %+v", list)
	}
	for _, l := range list {
		if l.Key != "" {
			t.Errorf("the list carries a secret: %+v", l)
		}
		switch l.ID {
		case k.ID:
			if l.Invalid || l.Description != k.Description || !reflect.DeepEqual(l.Tags, []string{"tag:k8s"}) || !l.Created.Equal(k.Created) {
				t.Errorf("unused key listed as %+v", l)
			}
		case used.ID:
			if !l.Invalid {
				t.Errorf("used single-use key listed as valid: %+v", l)
			}
		default:
			t.Errorf("unknown key %+v", l)
		}
	}
	// An API that lists IDs only: the details are fetched key by key.
	srv.ListIDsOnly(true)
	ids, err := b.ListAuthKeys(ctx(t))
	if err != nil || !reflect.DeepEqual(ids, list) {
		t.Fatalf("with IDs only: %+v %v, want %+v", ids, err, list)
	}
	srv.ListIDsOnly(false)
	if err := b.RevokeAuthKey(ctx(t), k.ID); err != nil {
		t.Fatal(err)
	}
	if err := b.RevokeAuthKey(ctx(t), k.ID); err != nil {
		t.Fatalf("revoking a revoked key: %v, want success", err)
	}
	if v := srv.ValidUnusedKeys(); len(v) != 0 {
		t.Fatalf("still valid: %+v", v)
	}
	if list, err = b.ListAuthKeys(ctx(t)); err != nil || len(list) != 1 || list[0].ID != used.ID {
		t.Fatalf("after revoke: %+v %v", list, err)
	}
	if _, err := b.MintAuthKey(ctx(t), tailnet.KeyRequest{Description: strings.Repeat("x", 51)}); err == nil || !strings.Contains(err.Error(), "longer than 50") {
		t.Fatalf("long description: %v", err)
	}
	srv.Fail(tailnettest.EndpointRevokeKey, tailnettest.Failure{Status: http.StatusServiceUnavailable, Message: "try later"})
	if err := b.RevokeAuthKey(ctx(t), used.ID); err == nil || !tailnet.Temporary(err) || !strings.Contains(err.Error(), "revoke auth key") {
		t.Fatalf("failing revoke: %v", err)
	}
}

func TestLoginServerIsTheAPIBase(t *testing.T) {
	b, srv := newBackend(t)
	if b.LoginServer() != srv.URL {
		t.Fatalf("LoginServer() = %q, want %q (trailing slash trimmed)", b.LoginServer(), srv.URL)
	}
	def, err := tailnet.NewTailscale(tailnet.Options{ClientID: "a", ClientSecret: "b"})
	if err != nil {
		t.Fatal(err)
	}
	if def.LoginServer() != tailnet.DefaultLoginServer {
		t.Fatalf("default LoginServer() = %q", def.LoginServer())
	}
	if _, err := tailnet.NewTailscale(tailnet.Options{LoginServer: "not a url", ClientID: "a", ClientSecret: "b"}); err == nil {
		t.Fatal("a relative login server was accepted")
	}
}

func TestDeleteDeviceTreatsNotFoundAsDone(t *testing.T) {
	b, srv := newBackend(t)
	srv.AddDevice(tailnettest.Device{ID: "nSTABLE1", Name: "default-web.tail1.ts.net.", Hostname: "default-web", Addresses: []string{"100.64.0.1"}})
	if err := b.DeleteDevice(ctx(t), "nSTABLE1"); err != nil {
		t.Fatal(err)
	}
	if len(srv.Devices()) != 0 {
		t.Fatal("device still exists")
	}
	if err := b.DeleteDevice(ctx(t), "nSTABLE1"); err != nil {
		t.Fatalf("deleting a missing device: %v, want success", err)
	}
	if got := srv.Deleted(); !reflect.DeepEqual(got, []string{"nSTABLE1", "nSTABLE1"}) {
		t.Fatalf("server saw deletes %v", got)
	}
	srv.Fail(tailnettest.EndpointDelete, tailnettest.Failure{Status: http.StatusForbidden, Message: "calling actor does not have enough permissions"})
	err := b.DeleteDevice(ctx(t), "nOTHER")
	if err == nil || !strings.Contains(err.Error(), "calling actor does not have enough permissions") || tailnet.Temporary(err) {
		t.Fatalf("got %v, want a permanent error with the API's message", err)
	}
}

func TestListDevices(t *testing.T) {
	b, srv := newBackend(t)
	srv.AddDevice(tailnettest.Device{ID: "n1", Name: "default-web.tail1.ts.net.", Hostname: "default-web", Addresses: []string{"100.64.0.1", "fd7a:115c:a1e0::1"}, Tags: []string{"tag:k8s"}})
	devs, err := b.ListDevices(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	want := []tailnet.Device{{ID: "n1", Name: "default-web.tail1.ts.net", Hostname: "default-web", Addresses: []string{"100.64.0.1", "fd7a:115c:a1e0::1"}, Tags: []string{"tag:k8s"}}}
	if !reflect.DeepEqual(devs, want) {
		t.Fatalf("got %+v, want %+v", devs, want)
	}
}

func TestErrorsCarryTheAPIMessage(t *testing.T) {
	cases := []struct {
		name      string
		endpoint  string
		failure   tailnettest.Failure
		want      string
		temporary bool
	}{
		{"quota", tailnettest.EndpointKeys, tailnettest.Failure{Status: http.StatusTooManyRequests, Message: "auth key quota exceeded"}, "auth key quota exceeded (HTTP 429)", true},
		{"tags", tailnettest.EndpointKeys, tailnettest.Failure{Status: http.StatusBadRequest, Message: "requested tags [tag:nope] are invalid or not permitted"}, "requested tags [tag:nope] are invalid or not permitted (HTTP 400)", false},
		{"server", tailnettest.EndpointKeys, tailnettest.Failure{Status: http.StatusInternalServerError, Message: "internal error"}, "internal error (HTTP 500)", true},
		{"html", tailnettest.EndpointKeys, tailnettest.Failure{Status: http.StatusBadGateway, Raw: "<html>bad gateway</html>"}, "unreadable answer", true},
		{"credentials", tailnettest.EndpointToken, tailnettest.Failure{Status: http.StatusUnauthorized, Message: "client secret revoked"}, "OAuth token refused: client secret revoked", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, srv := newBackend(t)
			srv.Fail(tc.endpoint, tc.failure)
			_, err := b.CreateAuthKey(ctx(t), []string{"tag:k8s"}, true, false, false)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
			if !strings.HasPrefix(err.Error(), "tailnet API: create auth key: ") {
				t.Errorf("error %q does not say what was attempted", err)
			}
			if tailnet.Temporary(err) != tc.temporary {
				t.Errorf("Temporary = %v, want %v", tailnet.Temporary(err), tc.temporary)
			}
			var apiErr *tailnet.Error
			if !errors.As(err, &apiErr) {
				t.Errorf("%T is not a *tailnet.Error", err)
			}
		})
	}
}

func TestVerifyRejectsWrongCredentials(t *testing.T) {
	srv := tailnettest.NewServer()
	t.Cleanup(srv.Close)
	b, err := tailnet.NewTailscale(tailnet.Options{LoginServer: srv.URL, ClientID: tailnettest.ClientID, ClientSecret: "wrong"})
	if err != nil {
		t.Fatal(err)
	}
	err = b.Verify(ctx(t))
	if err == nil || !tailnet.IsUnauthorized(err) || !strings.Contains(err.Error(), "invalid client credentials") {
		t.Fatalf("got %v, want an unauthorized error with the API's message", err)
	}
	good, _ := newBackend(t)
	if err := good.Verify(ctx(t)); err != nil {
		t.Fatalf("valid credentials: %v", err)
	}
}

func TestNewTailscaleFromFiles(t *testing.T) {
	srv := tailnettest.NewServer()
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	id, secret := filepath.Join(dir, "client_id"), filepath.Join(dir, "client_secret")
	_ = os.WriteFile(id, []byte(tailnettest.ClientID+"\n"), 0o600)
	_ = os.WriteFile(secret, []byte(tailnettest.ClientSecret+"\n"), 0o600)
	b, err := tailnet.NewTailscaleFromFiles(srv.URL, id, secret)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Verify(ctx(t)); err != nil {
		t.Fatalf("credentials with a trailing newline: %v", err)
	}
	_ = os.WriteFile(secret, nil, 0o600)
	if _, err := tailnet.NewTailscaleFromFiles(srv.URL, id, secret); err == nil || !strings.Contains(err.Error(), "is empty") {
		t.Fatalf("empty secret file: %v", err)
	}
	if _, err := tailnet.NewTailscaleFromFiles(srv.URL, filepath.Join(dir, "missing"), secret); err == nil || !strings.Contains(err.Error(), "client ID") {
		t.Fatalf("missing ID file: %v", err)
	}
}

func TestTailscaleServicesRoundTrip(t *testing.T) {
	b, srv := newBackend(t)
	c := ctx(t)
	if got, err := b.GetService(c, "svc:web"); err != nil || got != nil {
		t.Fatalf("missing service: got %v, %v; want nil, nil", got, err)
	}
	want := tailnet.Service{Name: "svc:web", Ports: []string{"tcp:443"}, Tags: []string{"tag:k8s"},
		Annotations: map[string]string{"k": "v"}, Comment: "c"}
	if err := b.PutService(c, want); err != nil {
		t.Fatal(err)
	}
	got, err := b.GetService(c, "svc:web")
	if err != nil || got == nil {
		t.Fatalf("get after put: %v, %v", got, err)
	}
	if len(got.Addrs) != 2 || got.Ports[0] != "tcp:443" || got.Tags[0] != "tag:k8s" || got.Annotations["k"] != "v" {
		t.Fatalf("service read back as %+v", got)
	}
	addrs := got.Addrs
	want.Ports = []string{"tcp:443", "tcp:80"}
	if err := b.PutService(c, want); err != nil {
		t.Fatal(err)
	}
	list, err := b.ListServices(c)
	if err != nil || len(list) != 1 || len(list[0].Ports) != 2 || list[0].Addrs[0] != addrs[0] {
		t.Fatalf("list after update: %+v, %v (addresses must be kept: %v)", list, err, addrs)
	}
	if err := b.DeleteService(c, "svc:web"); err != nil {
		t.Fatal(err)
	}
	if err := b.DeleteService(c, "svc:web"); err != nil {
		t.Fatalf("deleting a deleted service: %v", err)
	}
	if len(srv.Services()) != 0 {
		t.Fatalf("services left: %v", srv.Services())
	}
	if err := b.PutService(c, tailnet.Service{Name: "svc:Bad_Name"}); err == nil || !strings.Contains(err.Error(), "invalid service name") {
		t.Fatalf("bad name: %v", err)
	}
}
