package imagebuild

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Prebuilt describes an image made of binaries that were built elsewhere
// (bench/official wraps the official Tailscale operator's binaries with it),
// in the same shape as Tailplane's images: one layer, the binaries in BinDir,
// an empty base.
type Prebuilt struct {
	// Name is the image's title label, e.g. k8s-operator.
	Name string
	// Binaries are the files to put in BinDir, each under its base name.
	Binaries []string
	// Entrypoint is the image's entrypoint; BinDir/<first binary> when empty.
	Entrypoint []string
	// User is the user:group the image runs as; User when empty.
	User string
	// Platform is the binaries' platform.
	Platform v1.Platform
	// Version is the version label (and, for WriteLayout, the ref name).
	Version string
	// Description and Source go into the labels; Source may be empty.
	Description, Source string
	// SourceDate is every timestamp in the image.
	SourceDate time.Time
	// Extra are files outside BinDir (bench/official's proxy image holds a
	// busybox for the official proxy's init container, which runs
	// /bin/sh -c "sysctl -w ...").
	Extra []ExtraFile
	// Path is the image's PATH; BinDir when empty.
	Path string
}

// BuildPrebuilt wraps p's binaries in a one-platform OCI image index.
func BuildPrebuilt(p Prebuilt) (v1.ImageIndex, error) {
	if p.Name == "" || len(p.Binaries) == 0 || p.Version == "" || p.Platform.OS == "" || p.Platform.Architecture == "" {
		return nil, errors.New("imagebuild: Prebuilt.Name, Binaries, Version and Platform are required")
	}
	files := make([]layerFile, 0, len(p.Binaries))
	seen := map[string]bool{}
	for _, path := range p.Binaries {
		base := filepath.Base(path)
		if seen[base] {
			return nil, fmt.Errorf("imagebuild: two binaries named %s", base)
		}
		seen[base] = true
		body, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("read binary: %w", err)
		}
		files = append(files, layerFile{name: base, body: body})
	}
	extra, err := readExtra(p.Extra, seen)
	if err != nil {
		return nil, err
	}
	entrypoint := p.Entrypoint
	if len(entrypoint) == 0 {
		entrypoint = []string{BinDir + "/" + files[0].name}
	}
	user := p.User
	if user == "" {
		user = User
	}
	date := p.SourceDate.UTC()
	l := map[string]string{
		"org.opencontainers.image.title":   p.Name,
		"org.opencontainers.image.version": p.Version,
		"org.opencontainers.image.created": date.Format(time.RFC3339),
	}
	if p.Description != "" {
		l["org.opencontainers.image.description"] = p.Description
	}
	if p.Source != "" {
		l["org.opencontainers.image.source"] = p.Source
	}
	names := make([]string, len(files))
	for i, f := range files {
		names[i] = f.name
	}
	img, err := singleLayerImage(imageSpec{
		files:      files,
		platform:   p.Platform,
		entrypoint: entrypoint,
		user:       user,
		createdBy:  "prebuilt binaries " + strings.Join(names, ", ") + " (tailplane deploy/images layout)",
		labels:     l,
		date:       date,
		extra:      extra,
		path:       p.Path,
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p.Name, err)
	}
	return indexOf([]platformImage{{platform: p.Platform, image: img}}, l)
}

// readExtra checks the extra files (absolute, one of Source and Link, each
// path once, none over a binary) and reads their bodies.
func readExtra(extra []ExtraFile, binaries map[string]bool) ([]ExtraFile, error) {
	out := make([]ExtraFile, 0, len(extra))
	paths := map[string]bool{}
	for _, f := range extra {
		clean := filepath.Clean(f.Path)
		switch {
		case !filepath.IsAbs(clean) || clean == "/":
			return nil, fmt.Errorf("imagebuild: extra file %q: want an absolute path", f.Path)
		case (f.Source == "") == (f.Link == ""):
			return nil, fmt.Errorf("imagebuild: extra file %s: give a source or a link target, not both or neither", clean)
		case paths[clean] || (filepath.Dir(clean) == BinDir && binaries[filepath.Base(clean)]):
			return nil, fmt.Errorf("imagebuild: two files at %s", clean)
		}
		paths[clean] = true
		f.Path = clean
		if f.Source != "" {
			body, err := os.ReadFile(f.Source)
			if err != nil {
				return nil, fmt.Errorf("imagebuild: extra file %s: %w", clean, err)
			}
			f.body = body
		}
		out = append(out, f)
	}
	return out, nil
}
