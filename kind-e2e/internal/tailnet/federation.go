package tailnet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Federation is a workload identity federation client of a tailnet's API:
// an OAuth client without a secret, whose API tokens are had for identity
// tokens (JWTs) of an issuer it trusts, as Tailscale's
// /api/v2/oauth/token-exchange hands them out
// (tailscale.com/client/tailscale/v2's IdentityFederation is its client).
type Federation struct {
	// ClientID is the client's ID, the exchange's client_id.
	ClientID string
	// Issuer is the iss the tokens must carry, Audience one of their aud,
	// Subject their sub ("" for any).
	Issuer, Audience, Subject string
	// Keys returns the issuer's signing keys, read from its OIDC discovery
	// document's jwks_uri; asked again when a token names a key not among
	// the last ones.
	Keys func(ctx context.Context) (*jose.JSONWebKeySet, error)
}

// federation verifies a Federation's identity tokens, keeping the
// issuer's keys between exchanges.
type federation struct {
	Federation
	mu   sync.Mutex
	keys *jose.JSONWebKeySet
}

// key returns the issuer's key kid, reading the keys again when kid is not
// among those read last.
func (f *federation) key(ctx context.Context, kid string) (*jose.JSONWebKey, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for fresh := false; ; fresh = true {
		if f.keys != nil {
			if ks := f.keys.Key(kid); len(ks) > 0 {
				return &ks[0], nil
			}
		}
		if fresh {
			return nil, fmt.Errorf("the issuer %s has no signing key %q", f.Issuer, kid)
		}
		keys, err := f.Keys(ctx)
		if err != nil {
			return nil, fmt.Errorf("read the signing keys of %s: %w", f.Issuer, err)
		}
		f.keys = keys
	}
}

// verify checks an identity token: signed by one of the issuer's keys,
// from the issuer, for the audience and subject, and not expired.
func (f *federation) verify(ctx context.Context, raw string) error {
	tok, err := jwt.ParseSigned(raw, []jose.SignatureAlgorithm{jose.RS256, jose.RS384, jose.RS512, jose.ES256, jose.ES384})
	if err != nil {
		return fmt.Errorf("not a signed JWT: %w", err)
	}
	if len(tok.Headers) != 1 {
		return errors.New("the JWT must have exactly one signature")
	}
	k, err := f.key(ctx, tok.Headers[0].KeyID)
	if err != nil {
		return err
	}
	var claims jwt.Claims
	if err := tok.Claims(k.Key, &claims); err != nil {
		return fmt.Errorf("signature: %w", err)
	}
	if err := claims.ValidateWithLeeway(jwt.Expected{Issuer: f.Issuer, AnyAudience: jwt.Audience{f.Audience}, Time: time.Now()}, time.Minute); err != nil {
		return fmt.Errorf("claims (iss %q, aud %q, sub %q): %w", claims.Issuer, strings.Join(claims.Audience, ","), claims.Subject, err)
	}
	if f.Subject != "" && claims.Subject != f.Subject {
		return fmt.Errorf("subject %q is not the federated client's %q", claims.Subject, f.Subject)
	}
	return nil
}

// serveTokenExchange trades an identity token of the federated client for
// an API token of the tailnet, valid for an hour.
func (t *Tailnet) serveTokenExchange(w http.ResponseWriter, r *http.Request) {
	refuse := func(code int, kind, why string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": kind, "error_description": why})
	}
	if err := r.ParseForm(); err != nil {
		refuse(http.StatusBadRequest, "invalid_request", "bad form: "+err.Error())
		return
	}
	f := t.federation
	if f == nil || r.PostForm.Get("client_id") != f.ClientID {
		refuse(http.StatusUnauthorized, "invalid_client", "no workload identity federation client "+r.PostForm.Get("client_id"))
		return
	}
	if err := f.verify(r.Context(), r.PostForm.Get("jwt")); err != nil {
		t.logger.Warn("refused an identity token", "client", f.ClientID, "err", err)
		refuse(http.StatusUnauthorized, "invalid_grant", "identity token refused: "+err.Error())
		return
	}
	tok := t.store.issueFederatedToken()
	writeJSON(w, map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": 3600})
}

// federatedClientID is the client ID of a tailnet's federated client, ""
// without one.
func (t *Tailnet) federatedClientID() string {
	id, _ := t.FederatedClient()
	return id
}

// FederatedClient is the client ID and audience of the tailnet's workload
// identity federation client (Config.Federation); "" without one.
func (t *Tailnet) FederatedClient() (clientID, audience string) {
	if t.federation == nil {
		return "", ""
	}
	return t.federation.ClientID, t.federation.Audience
}
