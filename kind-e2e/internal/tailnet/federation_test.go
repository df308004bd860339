package tailnet

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	tsapi "tailscale.com/client/tailscale/v2"
)

// issuer signs identity tokens as a cluster's service-account issuer does.
type issuer struct {
	key    *rsa.PrivateKey
	signer jose.Signer
}

func newIssuer(t *testing.T) *issuer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: key, KeyID: "k1"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &issuer{key: key, signer: signer}
}

func (i *issuer) keys(context.Context) (*jose.JSONWebKeySet, error) {
	return &jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &i.key.PublicKey, KeyID: "k1", Algorithm: "RS256", Use: "sig"}}}, nil
}

func (i *issuer) token(t *testing.T, iss, aud, sub string, exp time.Time) string {
	t.Helper()
	raw, err := jwt.Signed(i.signer).Claims(jwt.Claims{Issuer: iss, Audience: jwt.Audience{aud}, Subject: sub,
		Expiry: jwt.NewNumericDate(exp), IssuedAt: jwt.NewNumericDate(time.Now())}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// The official client library's IdentityFederation gets an API token for
// a token of the trusted issuer, audience and subject, and for nothing
// else.
func TestTokenExchangeVerifiesTheIdentityToken(t *testing.T) {
	iss := newIssuer(t)
	const issuerURL, aud, sub = "https://kubernetes.default.svc.cluster.local", "devcluster-tailnet", "system:serviceaccount:tailscale:operator"
	tn, err := Start(t.Context(), Config{
		StateFile: filepath.Join(t.TempDir(), "state.json"), Addr: "127.0.0.1:0", MagicDNSDomain: "test.ts.net", Logger: testLogger(),
		Federation: &Federation{ClientID: "fed1", Issuer: issuerURL, Audience: aud, Subject: sub, Keys: iss.keys},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tn.Close)
	base, err := url.Parse(tn.URL)
	if err != nil {
		t.Fatal(err)
	}
	listWith := func(token string) error {
		api := &tsapi.Client{BaseURL: base, Tailnet: "-", Auth: &tsapi.IdentityFederation{ClientID: "fed1",
			IDTokenFunc: func() (string, error) { return token, nil }}}
		_, err := api.Devices().List(t.Context())
		return err
	}
	hour := time.Now().Add(time.Hour)
	if err := listWith(iss.token(t, issuerURL, aud, sub, hour)); err != nil {
		t.Fatalf("a good identity token: %v", err)
	}
	for what, tok := range map[string]string{
		"issuer":   iss.token(t, "https://elsewhere.example", aud, sub, hour),
		"audience": iss.token(t, issuerURL, "another-audience", sub, hour),
		"subject":  iss.token(t, issuerURL, aud, "system:serviceaccount:default:default", hour),
		"key":      newIssuer(t).token(t, issuerURL, aud, sub, hour),
	} {
		if err := listWith(tok); err == nil || !strings.Contains(err.Error(), "identity token refused") {
			t.Errorf("a token with the wrong %s: %v", what, err)
		}
	}
}
