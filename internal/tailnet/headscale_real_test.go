//go:build headscale

// These tests run the Headscale backend against a real Headscale v0.27.1
// (devcluster tailnet --control headscale, with the headscale binary of go
// tool task test:headscale in TAILPLANE_TEST_ASSETS). They are built only
// with -tags headscale (go tool task test:headscale-backend), so that go
// tool task test does not need headscale's long cold build.
package tailnet_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"tailscale.com/envknob"
	"tailscale.com/net/netns"
	"tailscale.com/tsnet"

	"github.com/tailplane/tailplane/internal/tailnet"
	"github.com/tailplane/tailplane/internal/testenv"
	"github.com/tailplane/tailplane/internal/testpoll"
)

// realHeadscale starts `devcluster tailnet --control headscale` in a temp
// folder and returns its tailnet.env.
func realHeadscale(t *testing.T) map[string]string {
	t.Helper()
	bin, err := testenv.Binary()
	if err != nil {
		t.Fatal(err)
	}
	hs := filepath.Join(filepath.Dir(bin), "headscale")
	if _, err := os.Stat(hs); err != nil {
		t.Fatalf("no headscale binary next to devcluster (%v): run go tool task test:headscale", err)
	}
	dir := t.TempDir()
	cmd := exec.Command(bin, "tailnet", "--dir", dir, "--control", "headscale", "--headscale", hs)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	logFile, err := os.Create(filepath.Join(dir, "devcluster.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = logFile
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		<-exited
		logFile.Close()
	})
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "ready tailnet="); ok {
				ready <- rest
			}
		}
	}()
	var envFile string
	select {
	case envFile = <-ready:
	case <-exited:
		log, _ := os.ReadFile(logFile.Name())
		t.Fatalf("devcluster tailnet --control headscale exited:\n%s", log)
	case <-time.After(2 * time.Minute):
		t.Fatal("devcluster tailnet --control headscale not ready in 2 minutes")
	}
	b, err := os.ReadFile(envFile)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for line := range strings.Lines(string(b)) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok && !strings.HasPrefix(k, "#") {
			env[k] = v
		}
	}
	if env["HEADSCALE_URL"] == "" || env["HEADSCALE_API_KEY"] == "" {
		t.Fatalf("tailnet.env has no Headscale URL or API key: %v", env)
	}
	return env
}

func headscaleBackend(t *testing.T, env map[string]string) *tailnet.Headscale {
	t.Helper()
	b, err := tailnet.NewHeadscale(tailnet.HeadscaleOptions{URL: env["HEADSCALE_URL"] + "/", APIKey: env["HEADSCALE_API_KEY"]})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// joinNode brings a tsnet node up on the tailnet with key and returns its
// stable node ID as the node itself reports it.
func joinNode(t *testing.T, ctx context.Context, env map[string]string, hostname, key string) string {
	t.Helper()
	netns.SetEnabled(false)
	envknob.SetNoLogsNoSupport()
	node := &tsnet.Server{ControlURL: env["TS_CONTROL_URL"], Hostname: hostname, AuthKey: key,
		Dir: t.TempDir(), Logf: func(string, ...any) {}}
	st, err := node.Up(ctx)
	if err != nil {
		t.Fatalf("join Headscale: %v", err)
	}
	t.Cleanup(func() { node.Close() })
	return string(st.Self.ID)
}

// The backend against a real Headscale: the startup check (which creates
// the keys' owner), a refused API key, tagged pre-auth keys minted, listed
// with their description and revoked (twice, and an unknown one, without
// error), a device made with a key listed with the key's tags under the ID
// its client reports, and deleted (twice without error); the key it used
// is listed as spent. Tailscale Services are refused as unsupported.
func TestHeadscaleBackendAgainstHeadscale(t *testing.T) {
	env := realHeadscale(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	b := headscaleBackend(t, env)
	if err := b.Verify(ctx); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if b.LoginServer() != env["HEADSCALE_URL"] {
		t.Fatalf("login server %q, want %q", b.LoginServer(), env["HEADSCALE_URL"])
	}
	bad, _ := tailnet.NewHeadscale(tailnet.HeadscaleOptions{URL: env["HEADSCALE_URL"], APIKey: "hskey-api-wrong"})
	if err := bad.Verify(ctx); !tailnet.IsUnauthorized(err) {
		t.Fatalf("a wrong API key: %v, want unauthorized", err)
	}

	unused, err := b.MintAuthKey(ctx, tailnet.KeyRequest{Tags: []string{"tag:k8s"}, Preauthorized: true, Description: "tailplane ts-unused-0"})
	if err != nil {
		t.Fatalf("mint: %v", err)
	}
	keys, err := b.ListAuthKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(keys, func(k tailnet.AuthKey) bool { return k.ID == unused.ID })
	if i < 0 || keys[i].Invalid || keys[i].Description != "tailplane ts-unused-0" || !slices.Equal(keys[i].Tags, []string{"tag:k8s"}) || keys[i].Key != "" {
		t.Fatalf("listed %+v, want %+v valid with its tags and description, no secret", keys, unused)
	}
	for range 2 {
		if err := b.RevokeAuthKey(ctx, unused.ID); err != nil {
			t.Fatalf("revoke: %v", err)
		}
	}
	if err := b.RevokeAuthKey(ctx, "999999"); err != nil {
		t.Fatalf("revoke an unknown key: %v", err)
	}
	if keys, _ = b.ListAuthKeys(ctx); !keys[slices.IndexFunc(keys, func(k tailnet.AuthKey) bool { return k.ID == unused.ID })].Invalid {
		t.Fatalf("revoked key still valid: %+v", keys)
	}

	used, err := b.MintAuthKey(ctx, tailnet.KeyRequest{Tags: []string{"tag:k8s"}, Preauthorized: true, Description: "tailplane ts-web-0"})
	if err != nil {
		t.Fatal(err)
	}
	id := joinNode(t, ctx, env, "ts-web", used.Key)
	devs, err := b.ListDevices(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d := slices.IndexFunc(devs, func(d tailnet.Device) bool { return d.ID == id })
	if d < 0 || devs[d].Hostname != "ts-web" || !slices.Equal(devs[d].Tags, []string{"tag:k8s"}) || len(devs[d].Addresses) == 0 {
		t.Fatalf("devices %+v: want %s (ts-web, tag:k8s, with addresses)", devs, id)
	}
	if keys, _ = b.ListAuthKeys(ctx); !keys[slices.IndexFunc(keys, func(k tailnet.AuthKey) bool { return k.ID == used.ID })].Invalid {
		t.Fatalf("a spent single-use key is listed as valid: %+v", keys)
	}
	for range 2 {
		if err := b.DeleteDevice(ctx, id); err != nil {
			t.Fatalf("delete device: %v", err)
		}
	}
	testpoll.Until(t, 30*time.Second, "device gone", func() error {
		devs, err := b.ListDevices(ctx)
		if err != nil {
			return err
		}
		if slices.ContainsFunc(devs, func(d tailnet.Device) bool { return d.ID == id }) {
			return fmt.Errorf("still listed: %+v", devs)
		}
		return nil
	})

	if tailnet.Supports(b, tailnet.FeatureServices) || tailnet.Supports(b, tailnet.FeatureCertificates) {
		t.Fatal("Headscale claims Tailscale Services or certificates")
	}
	if _, err := b.GetService(ctx, "svc:web"); !errors.Is(err, tailnet.ErrUnsupported) {
		t.Fatalf("GetService: %v, want ErrUnsupported", err)
	}
	var e *tailnet.Error
	if err := b.DeleteDevice(ctx, "nNotANumber"); !errors.As(err, &e) || e.Status != http.StatusBadRequest {
		t.Fatalf("a Tailscale-style ID: %v", err)
	}
}
