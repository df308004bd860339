package imagebuild

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	// BinDir is where each image holds its binary.
	BinDir = "/usr/local/bin"
	// User is the user and group every image runs as: the "nonroot" user of
	// distroless images, which the chart's and the proxies' pod security
	// contexts (runAsNonRoot, runAsUser 65532) expect.
	User = "65532:65532"
)

// passwd and group name the users the image knows, so that tools resolving
// the uid (and Go's os/user) find one; nothing in Tailplane needs them.
const (
	passwd = "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	group  = "root:x:0:\nnonroot:x:65532:\n"
)

// platformImage is one platform's image of a command.
type platformImage struct {
	platform v1.Platform
	image    v1.Image
}

// platformImageOf wraps one binary in a single-layer OCI image.
func platformImageOf(c Command, p v1.Platform, binary string, opts Options) (v1.Image, error) {
	tarBytes, err := layerTar(c.Name, binary, opts.SourceDate)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(tarBytes)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressionLevel(gzip.BestCompression), tarball.WithCompressedCaching)
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	created := v1.Time{Time: opts.SourceDate}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History: v1.History{
			Created:   created,
			CreatedBy: "go build -trimpath -ldflags='-s -w' " + c.Package + " (CGO_ENABLED=0, tailplane deploy/images)",
		},
	})
	if err != nil {
		return nil, fmt.Errorf("append layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = p.OS, p.Architecture, p.Variant
	cf.Created = created
	cf.Config = v1.Config{
		Entrypoint: []string{BinDir + "/" + c.Name},
		User:       User,
		WorkingDir: "/",
		Env:        []string{"PATH=" + BinDir},
		Labels:     labels(c, opts),
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return img, nil
}

// layerTar is the image's only layer: the binary, a world-writable /tmp (the
// proxy keeps tsnet's scratch folder there; the root is not writable by the
// non-root user) and passwd/group entries. Owners, modes and times are fixed
// so that the same binary always gives the same bytes.
func layerTar(name, binary string, date time.Time) ([]byte, error) {
	bin, err := os.ReadFile(binary)
	if err != nil {
		return nil, fmt.Errorf("read binary: %w", err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	entries := []struct {
		name string
		mode int64
		body []byte
		dir  bool
	}{
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/group", mode: 0o644, body: []byte(group)},
		{name: "etc/passwd", mode: 0o644, body: []byte(passwd)},
		{name: "tmp/", mode: 0o1777, dir: true},
		{name: "usr/", mode: 0o755, dir: true},
		{name: "usr/local/", mode: 0o755, dir: true},
		{name: "usr/local/bin/", mode: 0o755, dir: true},
		{name: "usr/local/bin/" + name, mode: 0o755, body: bin},
	}
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, ModTime: date, Format: tar.FormatUSTAR, Typeflag: tar.TypeReg, Size: int64(len(e.body))}
		if e.dir {
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("layer %s: %w", e.name, err)
		}
		if _, err := tw.Write(e.body); err != nil {
			return nil, fmt.Errorf("layer %s: %w", e.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	return buf.Bytes(), nil
}

// indexOf joins the platforms' images into one OCI image index carrying the
// labels as annotations (registries show them).
func indexOf(images []platformImage, annotations map[string]string) (v1.ImageIndex, error) {
	adds := make([]mutate.IndexAddendum, 0, len(images))
	for _, pi := range images {
		p := pi.platform
		adds = append(adds, mutate.IndexAddendum{Add: pi.image, Descriptor: v1.Descriptor{Platform: &p}})
	}
	idx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), adds...)
	out, ok := mutate.Annotations(idx, annotations).(v1.ImageIndex)
	if !ok {
		return nil, fmt.Errorf("annotated index is not an index")
	}
	return out, nil
}
