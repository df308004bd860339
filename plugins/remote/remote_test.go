package remote_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/tailplane/tailplane/plugins/remote"
	"github.com/tailplane/tailplane/plugins/source"
)

// module is a valid (empty) WebAssembly module with a custom section of n
// bytes, so tests can make modules of any size and digest.
func module(n int, fill byte) []byte {
	b := []byte("\x00asm\x01\x00\x00\x00")
	payload := append([]byte{1, 'x'}, bytes.Repeat([]byte{fill}, n)...)
	b = append(b, 0) // custom section
	for v := uint32(len(payload)); ; {
		c := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			b = append(b, c|0x80)
			continue
		}
		b = append(b, c)
		break
	}
	return append(b, payload...)
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// newRegistry starts go-containerregistry's in-process registry; a private
// one wants user "puller" with password "s3cret" for everything (the /v2/
// ping included, which is how clients learn to send credentials).
func newRegistry(t testing.TB, private bool) string {
	t.Helper()
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if private {
			if u, p, ok := r.BasicAuth(); !ok || u != "puller" || p != "s3cret" {
				w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusUnauthorized)
				_, _ = io.WriteString(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`)
				return
			}
		}
		reg.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

type keychain struct{ authn.Authenticator }

func (k keychain) Resolve(authn.Resource) (authn.Authenticator, error) { return k.Authenticator, nil }

var puller = keychain{&authn.Basic{Username: "puller", Password: "s3cret"}}

func dockerConfig(host, user, pass string) []byte {
	auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
	return []byte(`{"auths":{"` + host + `":{"auth":"` + auth + `"}}}`)
}

func push(t *testing.T, ref string, b []byte, o remote.PushOptions) remote.Pushed {
	t.Helper()
	if o.Keychain == nil {
		o.Keychain = puller
	}
	p, err := remote.Push(ctx(t), ref, b, o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A module pushed as an OCI artifact (and one inside an image layer, as
// Istio's Docker format has it) comes back verified; every way a fetch can
// fail is its own error.
func TestFetchOCI(t *testing.T) {
	host, private := newRegistry(t, false), newRegistry(t, true)
	mod := module(3<<20, 7) // above the 1 MiB a ConfigMap holds
	pushed := push(t, "oci://"+host+"/plugins/canary:v1", mod, remote.PushOptions{})
	if pushed.SHA256 != digest(mod) || !strings.HasPrefix(pushed.Ref, host+"/plugins/canary@sha256:") {
		t.Fatalf("pushed %+v", pushed)
	}

	for _, ref := range []string{host + "/plugins/canary:v1", "oci://" + host + "/plugins/canary:v1", pushed.Ref} {
		got, err := remote.FetchOCI(ctx(t), ref, remote.Options{SHA256: digest(mod)})
		if err != nil {
			t.Fatalf("%s: %v", ref, err)
		}
		if !bytes.Equal(got.Bytes, mod) || got.SHA256 != digest(mod) || got.Origin != pushed.Ref {
			t.Fatalf("%s: got %d bytes, sha256 %s, origin %s", ref, len(got.Bytes), got.SHA256, got.Origin)
		}
	}
	// Without a pin the digest is reported, for status.
	if got, err := remote.FetchOCI(ctx(t), host+"/plugins/canary:v1", remote.Options{}); err != nil || got.SHA256 != digest(mod) {
		t.Fatalf("unpinned: %v %+v", err, got.SHA256)
	}

	// Istio's Docker image format: a tar layer holding plugin.wasm.
	var tarBuf bytes.Buffer
	tw := tar.NewWriter(&tarBuf)
	small := module(100, 1)
	_ = tw.WriteHeader(&tar.Header{Name: "README", Mode: 0o644, Size: 2, Typeflag: tar.TypeReg})
	_, _ = tw.Write([]byte("hi"))
	_ = tw.WriteHeader(&tar.Header{Name: "plugin.wasm", Mode: 0o644, Size: int64(len(small)), Typeflag: tar.TypeReg})
	_, _ = tw.Write(small)
	_ = tw.Close()
	push(t, host+"/plugins/image:v1", tarBuf.Bytes(), remote.PushOptions{LayerMediaType: types.OCIUncompressedLayer})
	if got, err := remote.FetchOCI(ctx(t), host+"/plugins/image:v1", remote.Options{SHA256: digest(small)}); err != nil || !bytes.Equal(got.Bytes, small) {
		t.Fatalf("image layer: %v", err)
	}

	push(t, host+"/plugins/text:v1", []byte("hello, not wasm"), remote.PushOptions{LayerMediaType: remote.MediaTypeWasmLayer})
	push(t, host+"/plugins/config:v1", []byte(`{"a":1}`), remote.PushOptions{LayerMediaType: "application/json"})
	push(t, "oci://"+private+"/private/canary:v1", mod, remote.PushOptions{})

	closed := httptest.NewServer(http.NotFoundHandler())
	gone := strings.TrimPrefix(closed.URL, "http://")
	closed.Close()

	for name, tc := range map[string]struct {
		ref  string
		opts remote.Options
		want error
	}{
		"wrong digest":              {host + "/plugins/canary:v1", remote.Options{SHA256: strings.Repeat("0", 64)}, source.ErrSHA256Mismatch},
		"unknown tag":               {host + "/plugins/canary:v9", remote.Options{}, source.ErrNotFound},
		"unknown repository":        {host + "/plugins/nothing:v1", remote.Options{}, source.ErrNotFound},
		"wasm layer of text":        {host + "/plugins/text:v1", remote.Options{}, remote.ErrNotWasm},
		"no wasm layer":             {host + "/plugins/config:v1", remote.Options{}, remote.ErrNotWasm},
		"over the size limit":       {host + "/plugins/canary:v1", remote.Options{MaxSize: 1 << 20}, source.ErrTooLarge},
		"registry unreachable":      {gone + "/plugins/canary:v1", remote.Options{}, remote.ErrUnreachable},
		"pull secret required":      {private + "/private/canary:v1", remote.Options{}, remote.ErrUnauthorized},
		"wrong password":            {private + "/private/canary:v1", remote.Options{DockerConfig: dockerConfig(private, "puller", "nope")}, remote.ErrUnauthorized},
		"secret for another host":   {private + "/private/canary:v1", remote.Options{DockerConfig: dockerConfig("ghcr.io", "puller", "s3cret")}, remote.ErrUnauthorized},
		"secret that is not a file": {private + "/private/canary:v1", remote.Options{DockerConfig: []byte("puller:s3cret")}, remote.ErrUnauthorized},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := remote.FetchOCI(ctx(t), tc.ref, tc.opts)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "nope") {
				t.Fatalf("the error shows a credential: %v", err)
			}
		})
	}

	// With the pull secret (.dockerconfigjson, or legacy .dockercfg).
	for _, cfg := range [][]byte{dockerConfig(private, "puller", "s3cret"), []byte(`{"https://` + private + `/v1/":{"username":"puller","password":"s3cret"}}`)} {
		got, err := remote.FetchOCI(ctx(t), private+"/private/canary:v1", remote.Options{SHA256: digest(mod), DockerConfig: cfg})
		if err != nil || got.SHA256 != digest(mod) {
			t.Fatalf("with the pull secret: %v", err)
		}
	}
}

// An HTTPS source needs a pin; its body (plain or gzip) is bounded and
// verified before anything compiles it.
func TestFetchHTTPS(t *testing.T) {
	mod := module(2<<20, 3)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(mod)
	_ = zw.Close()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/canary.wasm":
			_, _ = w.Write(mod)
		case "/canary.wasm.gz":
			_, _ = w.Write(gz.Bytes())
		case "/page.html":
			_, _ = io.WriteString(w, "<html>not a module</html>")
		case "/private.wasm":
			w.WriteHeader(http.StatusForbidden)
		case "/flaky.wasm":
			w.WriteHeader(http.StatusBadGateway)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	tr := srv.Client().Transport
	pin := digest(mod)
	for _, path := range []string{"/canary.wasm", "/canary.wasm.gz"} {
		got, err := remote.FetchHTTPS(ctx(t), srv.URL+path, remote.Options{SHA256: pin, Transport: tr})
		if err != nil || !bytes.Equal(got.Bytes, mod) || got.SHA256 != pin {
			t.Fatalf("%s: %v", path, err)
		}
	}
	closed := httptest.NewTLSServer(http.NotFoundHandler())
	closed.Close()
	for name, tc := range map[string]struct {
		url  string
		opts remote.Options
		want error
	}{
		"wrong digest":        {srv.URL + "/canary.wasm", remote.Options{SHA256: strings.Repeat("1", 64)}, source.ErrSHA256Mismatch},
		"not found":           {srv.URL + "/missing.wasm", remote.Options{SHA256: pin}, source.ErrNotFound},
		"not wasm":            {srv.URL + "/page.html", remote.Options{SHA256: pin}, remote.ErrNotWasm},
		"over the size limit": {srv.URL + "/canary.wasm", remote.Options{SHA256: pin, MaxSize: 1 << 20}, source.ErrTooLarge},
		"gzip over the limit": {srv.URL + "/canary.wasm.gz", remote.Options{SHA256: pin, MaxSize: 1 << 20}, source.ErrTooLarge},
		"forbidden":           {srv.URL + "/private.wasm", remote.Options{SHA256: pin}, remote.ErrUnauthorized},
		"server error":        {srv.URL + "/flaky.wasm", remote.Options{SHA256: pin}, remote.ErrUnreachable},
		"unreachable":         {closed.URL + "/canary.wasm", remote.Options{SHA256: pin}, remote.ErrUnreachable},
	} {
		t.Run(name, func(t *testing.T) {
			tc.opts.Transport = tr
			if _, err := remote.FetchHTTPS(ctx(t), tc.url, tc.opts); !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
	// No pin, plain HTTP, or a certificate the operator does not trust:
	// refused.
	if _, err := remote.FetchHTTPS(ctx(t), srv.URL+"/canary.wasm", remote.Options{Transport: tr}); err == nil || !strings.Contains(err.Error(), "sha256") {
		t.Fatalf("without a pin: %v", err)
	}
	if _, err := remote.FetchHTTPS(ctx(t), strings.Replace(srv.URL, "https://", "http://", 1)+"/canary.wasm", remote.Options{SHA256: pin, Transport: tr}); err == nil {
		t.Fatal("plain http accepted")
	}
	if _, err := remote.FetchHTTPS(ctx(t), srv.URL+"/canary.wasm", remote.Options{SHA256: pin}); !errors.Is(err, remote.ErrUnreachable) {
		t.Fatalf("untrusted certificate: %v", err)
	}
}
