package remote

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/tailplane/tailplane/plugins/source"
)

// FetchHTTPS downloads the module at rawURL (https only; the pin is
// required, as nothing else vouches for what a URL serves) and verifies it.
// The body may be gzip-compressed.
func FetchHTTPS(ctx context.Context, rawURL string, o Options) (Module, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return Module{}, fmt.Errorf("module URL %q: want https://host/path", rawURL)
	}
	if o.SHA256 == "" {
		return Module{}, fmt.Errorf("module URL %s: an https module needs spec.module.sha256", u.Redacted())
	}
	origin := u.Redacted()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return Module{}, fmt.Errorf("%s: %w", origin, err)
	}
	req.Header.Set("Accept", "application/wasm, application/octet-stream;q=0.9, */*;q=0.1")
	client := &http.Client{Transport: o.transport()}
	resp, err := client.Do(req)
	if err != nil {
		return Module{}, fmt.Errorf("%s: %w: %v", origin, ErrUnreachable, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusOK:
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone:
		return Module{}, fmt.Errorf("%s: %w: HTTP %d", origin, source.ErrNotFound, resp.StatusCode)
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return Module{}, fmt.Errorf("%s: %w: HTTP %d", origin, ErrUnauthorized, resp.StatusCode)
	default:
		return Module{}, fmt.Errorf("%s: %w: HTTP %d", origin, ErrUnreachable, resp.StatusCode)
	}
	limit := o.maxSize()
	if resp.ContentLength > limit {
		return Module{}, fmt.Errorf("%s: %w: the server announces %d bytes, the limit is %d (spec.module.maxSize)", origin, source.ErrTooLarge, resp.ContentLength, limit)
	}
	b, err := readLimited(resp.Body, limit, origin)
	if err != nil {
		return Module{}, err
	}
	return verify(b, o, origin)
}
