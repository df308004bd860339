// Package remote fetches a RoutingPlugin's WebAssembly module from where
// plugin authors publish it: an OCI registry (an image whose layer holds
// the module, or an OCI artifact whose layer is the module, as Istio's
// WasmPlugin and Envoy Gateway accept) or an HTTPS URL.
//
// The operator is its only user: it holds the pull secret, and proxies
// never talk to registries (docs/plugins.md, "Where modules are fetched").
// Every fetch is bounded by a size limit, checked before the bytes are
// read where the registry or server announces the size, and the module's
// sha256 is checked against the pin before anything compiles it.
//
// It may import go-containerregistry, plugins/source (errors shared with
// the ConfigMap and Secret sources) and the standard library.
package remote

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/tailplane/tailplane/plugins/source"
)

// Errors, wrapped with where the module came from; test with errors.Is.
// A missing module or tag is source.ErrNotFound, a wrong digest
// source.ErrSHA256Mismatch, a module over the limit source.ErrTooLarge.
var (
	// ErrUnreachable: the registry or server did not answer, or answered
	// with a server error; worth retrying.
	ErrUnreachable = errors.New("source unreachable")
	// ErrUnauthorized: the registry or server refused the credentials (or
	// their absence).
	ErrUnauthorized = errors.New("unauthorized")
	// ErrNotWasm: what was fetched is not a WebAssembly module (no layer
	// holds one, or the bytes lack the wasm header).
	ErrNotWasm = errors.New("not a WebAssembly module")
)

// wasmMagic starts every WebAssembly binary.
var wasmMagic = []byte("\x00asm")

// Options bound and authenticate one fetch.
type Options struct {
	// SHA256, when set, is the lowercase hex digest the module must have.
	SHA256 string
	// MaxSize bounds the module in bytes (decompressed); 0 means
	// source.MaxModuleSize.
	MaxSize int64
	// DockerConfig is the content of an imagePullSecret: a
	// kubernetes.io/dockerconfigjson (.dockerconfigjson) or a legacy
	// kubernetes.io/dockercfg (.dockercfg). Only OCI fetches use it.
	DockerConfig []byte
	// Transport carries the requests; nil means http.DefaultTransport.
	Transport http.RoundTripper
}

func (o Options) maxSize() int64 {
	if o.MaxSize > 0 {
		return o.MaxSize
	}
	return source.MaxModuleSize
}

func (o Options) transport() http.RoundTripper {
	if o.Transport != nil {
		return o.Transport
	}
	return http.DefaultTransport
}

// Module is a fetched, verified module.
type Module struct {
	// Bytes is the WebAssembly binary (decompressed).
	Bytes []byte
	// SHA256 is its lowercase hex digest.
	SHA256 string
	// Origin says exactly what was fetched: for OCI the repository and
	// manifest digest, for HTTPS the URL.
	Origin string
}

// verify decompresses b if it is gzip, then checks the size limit, the
// wasm header and the pin, in that order: the digest is never computed
// over something too large, and a layer that is no module at all is
// reported as such rather than as a digest mismatch.
func verify(b []byte, o Options, origin string) (Module, error) {
	limit := o.maxSize()
	if bytes.HasPrefix(b, []byte{0x1f, 0x8b}) {
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return Module{}, fmt.Errorf("%s: %w: %v", origin, source.ErrBadGzip, err)
		}
		if b, err = io.ReadAll(io.LimitReader(zr, limit+1)); err != nil {
			return Module{}, fmt.Errorf("%s: %w: %v", origin, source.ErrBadGzip, err)
		}
	}
	if int64(len(b)) > limit {
		return Module{}, fmt.Errorf("%s: %w: more than %d bytes (spec.module.maxSize)", origin, source.ErrTooLarge, limit)
	}
	if !bytes.HasPrefix(b, wasmMagic) {
		return Module{}, fmt.Errorf("%s: %w: the content does not start with the wasm header (\\0asm)", origin, ErrNotWasm)
	}
	sum := sha256.Sum256(b)
	digest := hex.EncodeToString(sum[:])
	if o.SHA256 != "" && !strings.EqualFold(o.SHA256, digest) {
		return Module{}, fmt.Errorf("%s: %w: module has sha256 %s, the pin is %s", origin, source.ErrSHA256Mismatch, digest, strings.ToLower(o.SHA256))
	}
	return Module{Bytes: b, SHA256: digest, Origin: origin}, nil
}

// readLimited reads at most limit+1 bytes of r, failing with
// source.ErrTooLarge beyond limit.
func readLimited(r io.Reader, limit int64, origin string) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w: read: %v", origin, ErrUnreachable, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: %w: more than %d bytes (spec.module.maxSize)", origin, source.ErrTooLarge, limit)
	}
	return b, nil
}
