package tailnet_test

import (
	"strings"
	"testing"

	"github.com/tailplane/tailplane/internal/tailnet"
)

// The settings a Headscale backend refuses up front, and the features it
// reports missing, with the message handlers show.
func TestNewHeadscaleChecksItsSettings(t *testing.T) {
	for _, o := range []tailnet.HeadscaleOptions{
		{URL: "headscale.example.com", APIKey: "k"},
		{URL: "https://headscale.example.com", APIKey: " \n"},
	} {
		if _, err := tailnet.NewHeadscale(o); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
	b, err := tailnet.NewHeadscale(tailnet.HeadscaleOptions{URL: " https://hs.example.com/ ", APIKey: "k\n"})
	if err != nil {
		t.Fatal(err)
	}
	if b.LoginServer() != "https://hs.example.com" {
		t.Fatalf("login server %q", b.LoginServer())
	}
	msg := tailnet.Unsupported(b, "a ProxyGroup", tailnet.FeatureCertificates, tailnet.FeatureServices)
	if !strings.HasPrefix(msg, "a ProxyGroup needs HTTPS certificates for MagicDNS names (ts.net certificates), which the control server (Headscale at https://hs.example.com) does not have") {
		t.Fatalf("message %q", msg)
	}
	ts, err := tailnet.NewTailscale(tailnet.Options{ClientID: "id", ClientSecret: "secret"})
	if err != nil {
		t.Fatal(err)
	}
	if msg := tailnet.Unsupported(ts, "a ProxyGroup", tailnet.FeatureServices, tailnet.FeatureCertificates); msg != "" {
		t.Fatalf("the Tailscale API lacks a feature: %q", msg)
	}
}
