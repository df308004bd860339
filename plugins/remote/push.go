package remote

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	ggremote "github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Pushed is what Push wrote.
type Pushed struct {
	// Ref is the repository and manifest digest (what to pin in a
	// reference: repo@sha256:...).
	Ref string
	// SHA256 is the module's digest (what spec.module.sha256 pins).
	SHA256 string
}

// PushOptions configure Push.
type PushOptions struct {
	// Keychain supplies credentials; authn.DefaultKeychain (the Docker
	// config) when nil.
	Keychain authn.Keychain
	// LayerMediaType overrides the layer's media type (tests push non-wasm
	// layers); MediaTypeWasmLayer when empty.
	LayerMediaType types.MediaType
}

// Push writes module to ref as an OCI artifact of one layer, the module
// itself (Istio's OCI wasm format, which Envoy Gateway reads too): no
// Docker, no tar. Registries on loopback and private addresses are spoken
// to over plain HTTP, as go-containerregistry does.
func Push(ctx context.Context, ref string, module []byte, o PushOptions) (Pushed, error) {
	if o.LayerMediaType == "" && !bytes.HasPrefix(module, wasmMagic) {
		return Pushed{}, fmt.Errorf("push %s: %w: the file does not start with the wasm header", ref, ErrNotWasm)
	}
	tag, err := name.ParseReference(TrimScheme(ref))
	if err != nil {
		return Pushed{}, fmt.Errorf("OCI reference %q: %w", ref, err)
	}
	mt := o.LayerMediaType
	if mt == "" {
		mt = MediaTypeWasmLayer
	}
	img, err := mutate.AppendLayers(empty.Image, static.NewLayer(module, mt))
	if err != nil {
		return Pushed{}, fmt.Errorf("build artifact: %w", err)
	}
	img = mutate.ConfigMediaType(mutate.MediaType(img, types.OCIManifestSchema1), MediaTypeWasmConfig)
	kc := o.Keychain
	if kc == nil {
		kc = authn.DefaultKeychain
	}
	if err := ggremote.Write(tag, img, ggremote.WithContext(ctx), ggremote.WithAuthFromKeychain(kc)); err != nil {
		return Pushed{}, fmt.Errorf("push %s: %w", tag, err)
	}
	digest, err := img.Digest()
	if err != nil {
		return Pushed{}, fmt.Errorf("digest of %s: %w", tag, err)
	}
	sum := sha256.Sum256(module)
	return Pushed{Ref: tag.Context().Digest(digest.String()).String(), SHA256: hex.EncodeToString(sum[:])}, nil
}
