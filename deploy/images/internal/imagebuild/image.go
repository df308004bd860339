package imagebuild

import (
	"archive/tar"
	"bytes"
	"cmp"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
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
	bin, err := os.ReadFile(binary)
	if err != nil {
		return nil, fmt.Errorf("read binary: %w", err)
	}
	return singleLayerImage(imageSpec{
		files:      []layerFile{{name: c.Name, body: bin}},
		platform:   p,
		entrypoint: []string{BinDir + "/" + c.Name},
		user:       User,
		createdBy:  "go build -trimpath -ldflags='-s -w' " + c.Package + " (CGO_ENABLED=0, tailplane deploy/images)",
		labels:     labels(c, opts),
		date:       opts.SourceDate,
	})
}

// layerFile is one executable of an image, placed in BinDir.
type layerFile struct {
	name string
	body []byte
}

// ExtraFile is a file of a prebuilt image outside BinDir: an executable
// copied from the host (Source) or a symbolic link (Link), at Path.
type ExtraFile struct {
	// Path is the absolute path in the image, e.g. /bin/busybox.
	Path string
	// Source is the host file to copy (mode 0755); empty for a link.
	Source string
	// Link is the target of a symbolic link, e.g. busybox.
	Link string
	body []byte
}

// imageSpec is what singleLayerImage puts in an image.
type imageSpec struct {
	files      []layerFile
	platform   v1.Platform
	entrypoint []string
	user       string
	createdBy  string
	labels     map[string]string
	date       time.Time
	// extra are files outside BinDir, with their bodies read.
	extra []ExtraFile
	// path is the image's PATH; BinDir when empty.
	path string
}

// singleLayerImage is an image of one layer (layerTar) on an empty base.
func singleLayerImage(spec imageSpec) (v1.Image, error) {
	tarBytes, err := layerTar(spec.files, spec.extra, spec.date)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(tarBytes)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressionLevel(gzip.BestCompression), tarball.WithCompressedCaching)
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	created := v1.Time{Time: spec.date}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History:   v1.History{Created: created, CreatedBy: spec.createdBy},
	})
	if err != nil {
		return nil, fmt.Errorf("append layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	cf = cf.DeepCopy()
	p := spec.platform
	cf.OS, cf.Architecture, cf.Variant = p.OS, p.Architecture, p.Variant
	cf.Created = created
	cf.Config = v1.Config{
		Entrypoint: spec.entrypoint,
		User:       spec.user,
		WorkingDir: "/",
		Env:        []string{"PATH=" + cmp.Or(spec.path, BinDir)},
		Labels:     spec.labels,
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return img, nil
}

// layerTar is the image's only layer: the binaries, a world-writable /tmp
// (the proxy keeps tsnet's scratch folder there; the root is not writable by
// the non-root user), passwd/group entries and the extra files with the
// folders that hold them. Owners, modes and times are fixed so that the
// same binaries always give the same bytes.
func layerTar(files []layerFile, extra []ExtraFile, date time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	type entry struct {
		name string
		mode int64
		body []byte
		dir  bool
		link string
	}
	entries := []entry{
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/group", mode: 0o644, body: []byte(group)},
		{name: "etc/passwd", mode: 0o644, body: []byte(passwd)},
		{name: "tmp/", mode: 0o1777, dir: true},
		{name: "usr/", mode: 0o755, dir: true},
		{name: "usr/local/", mode: 0o755, dir: true},
		{name: "usr/local/bin/", mode: 0o755, dir: true},
	}
	for _, f := range files {
		entries = append(entries, entry{name: "usr/local/bin/" + f.name, mode: 0o755, body: f.body})
	}
	dirs := map[string]bool{}
	for _, e := range entries {
		dirs[e.name] = e.dir
	}
	for _, f := range extra {
		name := strings.TrimPrefix(path.Clean(f.Path), "/")
		// Missing folders first, the outermost first.
		var missing []string
		for d := path.Dir(name); d != "."; d = path.Dir(d) {
			if !dirs[d+"/"] {
				dirs[d+"/"] = true
				missing = append(missing, d+"/")
			}
		}
		for i := len(missing) - 1; i >= 0; i-- {
			entries = append(entries, entry{name: missing[i], mode: 0o755, dir: true})
		}
		entries = append(entries, entry{name: name, mode: 0o755, body: f.body, link: f.Link})
	}
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, ModTime: date, Format: tar.FormatUSTAR, Typeflag: tar.TypeReg, Size: int64(len(e.body))}
		switch {
		case e.dir:
			h.Typeflag, h.Size = tar.TypeDir, 0
		case e.link != "":
			h.Typeflag, h.Size, h.Linkname, h.Mode = tar.TypeSymlink, 0, e.link, 0o777
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
