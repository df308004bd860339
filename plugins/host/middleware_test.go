package host_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tailplane/tailplane/plugins/host"
)

// The full http-wasm cycle: the guest reads the buffered request body (and
// the upstream still receives it), answers locally on one path, and on the
// others rewrites the upstream's buffered response in handle_response.
func TestMiddlewareBufferedRequestAndResponse(t *testing.T) {
	e, _ := newEngine(t)
	p := load(t, e, host.Config{Name: "middleware", Module: guest(t, "./plugins/host/testdata/middleware"), Timeout: 10 * time.Second})
	upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Seen-Body-Len", r.Header.Get("X-Body-Len"))
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, "upstream got: "+string(body))
	})
	srv := httptest.NewServer(p.Middleware(upstream))
	defer srv.Close()

	resp, err := http.Post(srv.URL+"/echo", "text/plain", strings.NewReader("hello wasm"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != 203 || string(body) != "UPSTREAM GOT: HELLO WASM" {
		t.Errorf("got %d %q; want 203 and the upper-cased upstream body", resp.StatusCode, body)
	}
	if resp.Header.Get("X-Upstream-Status") != "202" || resp.Header.Get("X-Seen-Body-Len") != "10" {
		t.Errorf("headers = %v", resp.Header)
	}

	resp, err = http.Get(srv.URL + "/local")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != 418 || string(body) != "short and stout\n" || resp.Header.Get("Content-Type") != "text/plain" {
		t.Errorf("local answer: %d %q %v", resp.StatusCode, body, resp.Header)
	}
}
