package imagebuild

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// PushOptions say where and how to push.
type PushOptions struct {
	// Registry is the registry and repository prefix, e.g. ghcr.io/me or
	// registry.lan:5000/tailplane; the image name is appended.
	Registry string
	// Tag of the pushed index, e.g. latest.
	Tag string
	// Insecure allows plain HTTP (loopback, .local and private-network
	// registries get it without asking, as in go-containerregistry).
	Insecure bool
	// Keychain supplies credentials; authn.DefaultKeychain (the Docker
	// config, ~/.docker/config.json or $DOCKER_CONFIG) when nil.
	Keychain authn.Keychain
}

// Reference is the tag an image is pushed to: <registry>/<name>:<tag>.
func Reference(opts PushOptions, imageName string) (name.Tag, error) {
	registry := strings.TrimSuffix(strings.TrimSpace(opts.Registry), "/")
	if registry == "" {
		return name.Tag{}, fmt.Errorf("no registry given (e.g. REGISTRY=ghcr.io/me or registry.lan:5000/tailplane)")
	}
	if strings.Contains(registry, "://") {
		return name.Tag{}, fmt.Errorf("registry %q: give host[:port]/prefix without a scheme", opts.Registry)
	}
	var nopts []name.Option
	if opts.Insecure {
		nopts = append(nopts, name.Insecure)
	}
	repo, err := name.NewRepository(registry+"/"+imageName, append(nopts, name.StrictValidation)...)
	if err != nil {
		return name.Tag{}, fmt.Errorf("registry %q is not a valid registry/prefix: %w", opts.Registry, err)
	}
	tag, err := name.NewTag(repo.Name()+":"+opts.Tag, append(nopts, name.StrictValidation)...)
	if err != nil {
		return name.Tag{}, fmt.Errorf("tag %q is not valid: %w", opts.Tag, err)
	}
	return tag, nil
}

// Push writes idx with all its images to the registry as
// <registry>/<imageName>:<tag> and returns the pushed reference with its
// digest.
func Push(ctx context.Context, idx v1.ImageIndex, imageName string, opts PushOptions) (name.Digest, error) {
	tag, err := Reference(opts, imageName)
	if err != nil {
		return name.Digest{}, err
	}
	kc := opts.Keychain
	if kc == nil {
		kc = authn.DefaultKeychain
	}
	if err := remote.WriteIndex(tag, idx, remote.WithContext(ctx), remote.WithAuthFromKeychain(kc)); err != nil {
		return name.Digest{}, fmt.Errorf("push %s to %s: %w", imageName, tag.Name(), err)
	}
	digest, err := idx.Digest()
	if err != nil {
		return name.Digest{}, fmt.Errorf("digest of %s: %w", imageName, err)
	}
	return tag.Context().Digest(digest.String()), nil
}
