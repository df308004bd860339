package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	realtailnet "github.com/tailplane/tailplane/internal/tailnettest"
	"github.com/tailplane/tailplane/internal/testpoll"
	"github.com/tailplane/tailplane/proxy/apiserver"
)

// APISERVER_PROXY and the deprecated AUTH_PROXY read as the official
// operator's; a bad value is an error naming the variable, not a panic.
func TestAPIServerProxyModeFromEnv(t *testing.T) {
	cases := []struct {
		api, auth string
		want      apiserver.Mode
		err       string
	}{
		{"", "", "", ""},
		{"false", "", "", ""},
		{"true", "", apiserver.ModeAuth, ""},
		{"noauth", "", apiserver.ModeNoAuth, ""},
		{"", "true", apiserver.ModeAuth, ""},
		{"", "false", "", ""},
		{"auth", "", "", `APISERVER_PROXY: "auth" is not one of true (auth mode), noauth or false`},
		{"", "maybe", "", `AUTH_PROXY: "maybe" is not a boolean`},
		{"true", "true", "", "mutually exclusive"},
	}
	for _, c := range cases {
		got, err := apiServerProxyMode(envOf(map[string]string{envAPIServerProxy: c.api, envAuthProxy: c.auth}))
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("APISERVER_PROXY=%q AUTH_PROXY=%q: %v, want an error with %q", c.api, c.auth, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("APISERVER_PROXY=%q AUTH_PROXY=%q: %q, %v; want %q", c.api, c.auth, got, err, c.want)
		}
	}
}

// With APISERVER_PROXY the operator's device serves TLS on port 443 once
// it runs (the handler behind it is proxy/apiserver's, tested there); a
// bad value stops the operator at startup with one line.
func TestOperatorServesAPIServerProxy(t *testing.T) {
	h := newDeviceHarness(t, nil)
	h.env[envAPIServerProxy] = "yes"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := run(ctx, envOf(h.env), &strings.Builder{}); err == nil || !strings.Contains(err.Error(), `APISERVER_PROXY: "yes"`) {
		t.Fatalf("APISERVER_PROXY=yes: %v, want a startup error naming it", err)
	}

	h.env[envAPIServerProxy] = "true"
	op := h.start(t)
	probe := h.waitReady(t, op)
	ips := probeIPs(probe)
	if len(ips) == 0 {
		t.Fatalf("no device IPs in %v", probe)
	}
	client := h.tn.Node(t, "kubectl")
	addr := net.JoinHostPort(ips[0], "443")
	// testcontrol issues no certificates, so the handshake ends in the
	// server's certificate lookup: proof that TLS is served there.
	testpoll.Until(t, 30*time.Second, "TLS on the operator device's port 443", func() error {
		dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c, err := client.Dial(dctx, "tcp", addr)
		if err != nil {
			return err
		}
		defer c.Close()
		tc := tls.Client(c, &tls.Config{ServerName: realtailnet.FQDN("tailscale-operator"), InsecureSkipVerify: true, NextProtos: []string{"h2", "http/1.1"}})
		err = tc.HandshakeContext(dctx)
		if err == nil {
			if p := tc.ConnectionState().NegotiatedProtocol; p != "http/1.1" {
				return fmt.Errorf("negotiated %q, want http/1.1 only (SPDY upgrades need it)", p)
			}
			return nil
		}
		if !strings.Contains(err.Error(), "tls: internal error") {
			return fmt.Errorf("handshake: %v", err)
		}
		return nil
	})
	if !strings.Contains(op.log.String(), "API server proxy listening on the tailnet") {
		t.Errorf("no start line in the log:\n%s", op.log)
	}
}
