package remote

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	ggremote "github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/tailplane/tailplane/plugins/source"
)

// Layer media types that are the module itself: Istio's OCI format (also
// what `tailplane-plugin push` writes) and the CNCF wasm artifact's.
const (
	MediaTypeWasmLayer  types.MediaType = "application/vnd.module.wasm.content.layer.v1+wasm"
	MediaTypeWasm       types.MediaType = "application/wasm"
	MediaTypeWasmConfig types.MediaType = "application/vnd.module.wasm.config.v1+json"
)

// TrimScheme strips the optional oci:// of a reference (Istio's url form).
func TrimScheme(ref string) string { return strings.TrimPrefix(ref, "oci://") }

// FetchOCI pulls the module of the image or artifact ref ("oci://" optional;
// a tag or a manifest digest). An index picks its wasip1/wasm or wasm
// platform entry, else its only one. The module is the first layer that is
// one: a wasm-typed layer (the module, maybe gzip), or an image layer
// (tar) holding plugin.wasm or a single *.wasm file.
func FetchOCI(ctx context.Context, ref string, o Options) (Module, error) {
	r, err := name.ParseReference(TrimScheme(ref))
	if err != nil {
		return Module{}, fmt.Errorf("OCI reference %q: %w", ref, err)
	}
	auth, err := authFor(o.DockerConfig, r.Context().RegistryStr())
	if err != nil {
		return Module{}, err
	}
	opts := []ggremote.Option{
		ggremote.WithContext(ctx), ggremote.WithAuth(auth), ggremote.WithTransport(o.transport()),
		// The operator retries the whole fetch with its own backoff; inside
		// one fetch, one quick retry of a dropped connection is enough.
		ggremote.WithRetryBackoff(ggremote.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Steps: 2}),
	}
	desc, err := ggremote.Get(r, opts...)
	if err != nil {
		return Module{}, classify(r.String(), err)
	}
	var img v1.Image
	if desc.MediaType.IsIndex() {
		img, err = pickFromIndex(desc)
	} else {
		img, err = desc.Image()
	}
	if err != nil {
		return Module{}, classify(r.String(), err)
	}
	digest, err := img.Digest()
	if err != nil {
		return Module{}, classify(r.String(), err)
	}
	origin := r.Context().String() + "@" + digest.String()
	layers, err := img.Layers()
	if err != nil {
		return Module{}, classify(origin, err)
	}
	limit := o.maxSize()
	var seen []string
	for _, l := range layers {
		mt, err := l.MediaType()
		if err != nil {
			return Module{}, classify(origin, err)
		}
		seen = append(seen, string(mt))
		size, err := l.Size()
		if err != nil {
			return Module{}, classify(origin, err)
		}
		var b []byte
		switch {
		case mt == MediaTypeWasmLayer || mt == MediaTypeWasm:
			if size > limit {
				return Module{}, fmt.Errorf("%s: %w: layer of %d bytes, the limit is %d (spec.module.maxSize)", origin, source.ErrTooLarge, size, limit)
			}
			b, err = readLayer(l.Compressed, limit, origin)
		case mt.IsLayer():
			b, err = fromTar(l, limit, origin)
		default:
			continue
		}
		if err != nil {
			return Module{}, err
		}
		if b == nil {
			continue // an image layer without a .wasm file
		}
		return verify(b, o, origin)
	}
	return Module{}, fmt.Errorf("%s: %w: no layer holds a module (layer media types: %s)", origin, ErrNotWasm, strings.Join(seen, ", "))
}

func readLayer(open func() (io.ReadCloser, error), limit int64, origin string) ([]byte, error) {
	rc, err := open()
	if err != nil {
		return nil, classify(origin, err)
	}
	defer rc.Close()
	b, err := readLimited(rc, limit, origin)
	if err != nil && !errors.Is(err, source.ErrTooLarge) {
		// The registry's verifying reader fails a blob whose digest is
		// not the manifest's: report the registry's error.
		return nil, classify(origin, err)
	}
	return b, err
}

// fromTar returns plugin.wasm, else the only *.wasm file, of an image layer;
// nil if the layer has neither.
func fromTar(l v1.Layer, limit int64, origin string) ([]byte, error) {
	rc, err := l.Uncompressed()
	if err != nil {
		return nil, classify(origin, err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	var found []byte
	count := 0
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w: image layer is not a tar archive: %v", origin, ErrNotWasm, err)
		}
		if h.Typeflag != tar.TypeReg || !strings.HasSuffix(h.Name, ".wasm") {
			continue
		}
		if h.Size > limit {
			return nil, fmt.Errorf("%s: %w: %s has %d bytes, the limit is %d (spec.module.maxSize)", origin, source.ErrTooLarge, h.Name, h.Size, limit)
		}
		b, err := readLimited(tr, limit, origin)
		if err != nil {
			return nil, err
		}
		if path.Base(h.Name) == "plugin.wasm" {
			return b, nil
		}
		found, count = b, count+1
	}
	if count == 1 {
		return found, nil
	}
	return nil, nil
}

func pickFromIndex(desc *ggremote.Descriptor) (v1.Image, error) {
	idx, err := desc.ImageIndex()
	if err != nil {
		return nil, err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, d := range m.Manifests {
		if p := d.Platform; p != nil && (p.OS == "wasip1" || p.OS == "wasi" || p.Architecture == "wasm") {
			return idx.Image(d.Digest)
		}
	}
	if len(m.Manifests) == 1 {
		return idx.Image(m.Manifests[0].Digest)
	}
	return nil, fmt.Errorf("%w: an index of %d manifests and none for platform wasip1/wasm", ErrNotWasm, len(m.Manifests))
}

// classify maps a registry or transport error to this package's errors.
func classify(origin string, err error) error {
	var te *transport.Error
	switch {
	case errors.Is(err, ErrNotWasm), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%s: %w", origin, err)
	case errors.As(err, &te):
		switch {
		case te.StatusCode == http.StatusUnauthorized || te.StatusCode == http.StatusForbidden:
			return fmt.Errorf("%s: %w: %v", origin, ErrUnauthorized, err)
		case te.StatusCode == http.StatusNotFound:
			return fmt.Errorf("%s: %w: %v", origin, source.ErrNotFound, err)
		}
		for _, d := range te.Errors {
			switch d.Code {
			case transport.ManifestUnknownErrorCode, transport.NameUnknownErrorCode, transport.BlobUnknownErrorCode:
				return fmt.Errorf("%s: %w: %v", origin, source.ErrNotFound, err)
			case transport.UnauthorizedErrorCode, transport.DeniedErrorCode:
				return fmt.Errorf("%s: %w: %v", origin, ErrUnauthorized, err)
			}
		}
	}
	return fmt.Errorf("%s: %w: %v", origin, ErrUnreachable, err)
}

// authFor returns the credentials of dockerConfig for registry, or
// anonymous access without a config (public images). A config that names
// no credentials for registry is an error: the pull would fail as
// unauthorized for a reason the user can fix in the Secret.
func authFor(dockerConfig []byte, registry string) (authn.Authenticator, error) {
	if len(dockerConfig) == 0 {
		return authn.Anonymous, nil
	}
	var wrapped struct {
		Auths map[string]authn.AuthConfig `json:"auths"`
	}
	auths := map[string]authn.AuthConfig{}
	if err := json.Unmarshal(dockerConfig, &wrapped); err == nil && wrapped.Auths != nil {
		auths = wrapped.Auths
	} else if err := json.Unmarshal(dockerConfig, &auths); err != nil {
		// Never include the content: it holds credentials.
		return nil, fmt.Errorf("imagePullSecret: %w: not a Docker config (.dockerconfigjson or .dockercfg)", ErrUnauthorized)
	}
	for key, cfg := range auths {
		if h := hostOf(key); h == registry || (h == "docker.io" && registry == name.DefaultRegistry) {
			return authn.FromConfig(cfg), nil
		}
	}
	return nil, fmt.Errorf("imagePullSecret: %w: it has no credentials for registry %s", ErrUnauthorized, registry)
}

// hostOf reduces a Docker config key ("https://index.docker.io/v1/",
// "ghcr.io", "registry:5000") to its host[:port].
func hostOf(key string) string {
	key = strings.TrimPrefix(strings.TrimPrefix(key, "https://"), "http://")
	host, _, _ := strings.Cut(key, "/")
	return host
}
