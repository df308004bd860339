package imagebuild

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// refNameAnnotation names an index in a layout's index.json (the tag).
const refNameAnnotation = "org.opencontainers.image.ref.name"

// WriteLayout writes idx as an OCI image layout in dir, replacing whatever
// was there, with version as its ref name.
func WriteLayout(dir string, idx v1.ImageIndex, version string) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("clear %s: %w", dir, err)
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(dir), err)
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{refNameAnnotation: version})); err != nil {
		return fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	return nil
}

// ReadLayout reads back the one image index that WriteLayout put in dir.
func ReadLayout(dir string) (v1.ImageIndex, error) {
	if _, err := os.Stat(filepath.Join(dir, "index.json")); errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("no OCI image layout in %s (build the images first: go tool task images)", dir)
	}
	outer, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	m, err := outer.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	if len(m.Manifests) != 1 || !m.Manifests[0].MediaType.IsIndex() {
		return nil, fmt.Errorf("OCI layout %s: want exactly one image index, found %d entries", dir, len(m.Manifests))
	}
	idx, err := outer.ImageIndex(m.Manifests[0].Digest)
	if err != nil {
		return nil, fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	return idx, nil
}

// PlatformSize is the compressed size of one platform's image: what a node
// pulls (manifest, config and layer).
type PlatformSize struct {
	Platform v1.Platform
	Bytes    int64
}

// Sizes reports the compressed size of each platform's image in idx.
func Sizes(idx v1.ImageIndex) ([]PlatformSize, error) {
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	var out []PlatformSize
	for _, d := range m.Manifests {
		img, err := idx.Image(d.Digest)
		if err != nil {
			return nil, err
		}
		man, err := img.Manifest()
		if err != nil {
			return nil, err
		}
		total := d.Size + man.Config.Size
		for _, l := range man.Layers {
			total += l.Size
		}
		ps := PlatformSize{Bytes: total}
		if d.Platform != nil {
			ps.Platform = *d.Platform
		}
		out = append(out, ps)
	}
	return out, nil
}
