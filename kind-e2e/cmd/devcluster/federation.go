package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/tailplane/tailplane/kind-e2e/internal/controlplane"
	"github.com/tailplane/tailplane/kind-e2e/internal/tailnet"
)

// The workload identity federation client of devcluster's tailnet: the
// operator's ServiceAccount (the chart's, in namespace tailscale) may have
// API tokens for its tokens with this audience, which the chart projects
// with oauth.audience and a Tailnet's Secret names in audience.
const (
	federatedClientID = "kFEDERATEDCNTRL"
	federatedAudience = "api.tailscale.com/" + federatedClientID
	federatedSubject  = "system:serviceaccount:tailscale:operator"
)

// clusterFederation is the federated client of the tailnet of the cluster
// cp, which trusts cp's own ServiceAccount issuer: the keys are read from
// the kube-apiserver's OIDC discovery document and the JWKS it names, as
// Tailscale reads an issuer's.
func clusterFederation(cp *controlplane.Cluster) *tailnet.Federation {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(cp.CA)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	get := func(ctx context.Context, path string, v any) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, cp.URL+path, nil)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+cp.Token)
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s: %s", path, resp.Status, body)
		}
		return json.Unmarshal(body, v)
	}
	return &tailnet.Federation{
		ClientID: federatedClientID, Issuer: controlplane.ServiceAccountIssuer, Audience: federatedAudience, Subject: federatedSubject,
		Keys: func(ctx context.Context) (*jose.JSONWebKeySet, error) {
			var discovery struct {
				Issuer  string `json:"issuer"`
				JWKSURI string `json:"jwks_uri"`
			}
			if err := get(ctx, "/.well-known/openid-configuration", &discovery); err != nil {
				return nil, fmt.Errorf("OIDC discovery: %w", err)
			}
			if discovery.Issuer != controlplane.ServiceAccountIssuer {
				return nil, fmt.Errorf("OIDC discovery names issuer %q, not %q", discovery.Issuer, controlplane.ServiceAccountIssuer)
			}
			// The document names the JWKS at the API server's advertised
			// address; it is read through the address devcluster knows.
			u, err := url.Parse(discovery.JWKSURI)
			if err != nil || u.Path == "" {
				return nil, errors.New("OIDC discovery names no jwks_uri")
			}
			var keys jose.JSONWebKeySet
			if err := get(ctx, u.Path, &keys); err != nil {
				return nil, fmt.Errorf("JWKS: %w", err)
			}
			return &keys, nil
		},
	}
}
