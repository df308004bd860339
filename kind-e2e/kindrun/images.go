package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// The images e2e:kind loads into the kind node, under the references the
// Helm chart (values.yaml: operatorConfig.image, proxyConfig.image) and the
// suite's testdata (the echo backends) use.
const (
	OperatorRepo = "ghcr.io/tailplane/tailplane-operator"
	ProxyRepo    = "ghcr.io/tailplane/tailplane-proxy"
	EchoRepo     = "ghcr.io/tailplane/echo"
)

// EchoRefs are the echo image's names: devcluster's real node's (":dev")
// and the testdata's untagged one.
var EchoRefs = []string{EchoRepo + ":dev", EchoRepo + ":latest"}

// Annotations in an OCI layout's index.json. containerd's `ctr images
// import` (what `kind load image-archive` runs on each node) names an image
// after the first; without it, an image whose ref name is only a tag
// ("kind-e2e") would be named import-<date>:kind-e2e.
const (
	containerdNameAnnotation = "io.containerd.image.name"
	refNameAnnotation        = "org.opencontainers.image.ref.name"
)

const (
	mediaIndex    = "application/vnd.oci.image.index.v1+json"
	mediaManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaConfig   = "application/vnd.oci.image.config.v1+json"
	mediaLayer    = "application/vnd.oci.image.layer.v1.tar"
)

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Platform    *platform         `json:"platform,omitempty"`
}

type platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
	Variant      string `json:"variant,omitempty"`
}

type index struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType,omitempty"`
	Manifests     []descriptor `json:"manifests"`
}

// LayoutArchive turns an OCI image layout written by deploy/images (`go
// tool task images`: index.json holds one image index whose ref name is the
// tag) into the OCI archive `kind load image-archive` takes: the layout's
// files in a tar, with index.json's entry named repo:tag for containerd.
// It fails unless the layout has the tag and a linux/arch image.
func LayoutArchive(layoutDir, repo, tag, arch, out string) error {
	b, err := os.ReadFile(filepath.Join(layoutDir, "index.json"))
	if err != nil {
		return fmt.Errorf("no OCI image layout in %s (go tool task images builds it): %w", layoutDir, err)
	}
	var top index
	if err := json.Unmarshal(b, &top); err != nil {
		return fmt.Errorf("%s/index.json: %w", layoutDir, err)
	}
	if len(top.Manifests) != 1 || top.Manifests[0].MediaType != mediaIndex {
		return fmt.Errorf("%s: want one image index in index.json, found %d entries", layoutDir, len(top.Manifests))
	}
	entry := &top.Manifests[0]
	if got := entry.Annotations[refNameAnnotation]; got != tag {
		return fmt.Errorf("%s holds tag %q, want %q (go tool task images TAG=%s)", layoutDir, got, tag, tag)
	}
	inner, err := os.ReadFile(filepath.Join(layoutDir, blobPath(entry.Digest)))
	if err != nil {
		return fmt.Errorf("%s: image index: %w", layoutDir, err)
	}
	var idx index
	if err := json.Unmarshal(inner, &idx); err != nil {
		return fmt.Errorf("%s: image index: %w", layoutDir, err)
	}
	var platforms []string
	for _, m := range idx.Manifests {
		if m.Platform != nil {
			platforms = append(platforms, m.Platform.OS+"/"+m.Platform.Architecture)
		}
	}
	if !slices.Contains(platforms, "linux/"+arch) {
		return fmt.Errorf("%s has images for %v, not linux/%s, the Docker engine's (go tool task images PLATFORMS=linux/%s)", layoutDir, platforms, arch, arch)
	}
	entry.Annotations[containerdNameAnnotation] = repo + ":" + tag
	rewritten, err := json.Marshal(top)
	if err != nil {
		return err
	}

	f, err := os.Create(out)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(layoutDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(layoutDir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if rel == "index.json" {
			return writeTarFile(tw, rel, rewritten)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		src, err := os.Open(p)
		if err != nil {
			return err
		}
		defer src.Close()
		if err := tw.WriteHeader(&tar.Header{Name: rel, Mode: 0o644, Size: info.Size(), ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err = io.Copy(tw, src)
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("archive %s: %w", layoutDir, err)
	}
	return nil
}

// EchoArchive writes the OCI archive of the suite's echo backend: one
// layer with the static devcluster-echo binary in /usr/local/bin, passwd
// and group entries for user 65532 ("nonroot", like the project's images)
// and a /tmp; one index entry per name in refs. Fixed times: the same
// binary gives the same image.
func EchoArchive(binary, arch string, refs []string, out string) error {
	bin, err := os.ReadFile(binary)
	if err != nil {
		return fmt.Errorf("echo image: %w", err)
	}
	name := filepath.Base(binary)
	layer, err := echoLayer(name, bin)
	if err != nil {
		return err
	}
	config, err := json.Marshal(map[string]any{
		"architecture": arch, "os": "linux",
		"config": map[string]any{
			"Entrypoint": []string{"/usr/local/bin/" + name},
			"User":       "65532:65532", "WorkingDir": "/",
			"Env": []string{"PATH=/usr/local/bin"},
		},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{digestOf(layer)}},
	})
	if err != nil {
		return err
	}
	manifest, err := json.Marshal(map[string]any{
		"schemaVersion": 2, "mediaType": mediaManifest,
		"config": descriptor{MediaType: mediaConfig, Digest: digestOf(config), Size: int64(len(config))},
		"layers": []descriptor{{MediaType: mediaLayer, Digest: digestOf(layer), Size: int64(len(layer))}},
	})
	if err != nil {
		return err
	}
	top := index{SchemaVersion: 2, MediaType: mediaIndex}
	for _, ref := range refs {
		top.Manifests = append(top.Manifests, descriptor{
			MediaType: mediaManifest, Digest: digestOf(manifest), Size: int64(len(manifest)),
			Annotations: map[string]string{containerdNameAnnotation: ref, refNameAnnotation: ref[strings.LastIndex(ref, ":")+1:]},
			Platform:    &platform{Architecture: arch, OS: "linux"},
		})
	}
	indexJSON, err := json.Marshal(top)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range []struct {
		name string
		body []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", indexJSON},
		{blobPath(digestOf(manifest)), manifest},
		{blobPath(digestOf(config)), config},
		{blobPath(digestOf(layer)), layer},
	} {
		if err := writeTarFile(tw, f.name, f.body); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return os.WriteFile(out, buf.Bytes(), 0o644)
}

func echoLayer(name string, bin []byte) ([]byte, error) {
	const (
		passwd = "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
		group  = "root:x:0:\nnonroot:x:65532:\n"
	)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range []struct {
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
	} {
		h := &tar.Header{Name: e.name, Mode: e.mode, ModTime: time.Unix(0, 0), Format: tar.FormatUSTAR, Typeflag: tar.TypeReg, Size: int64(len(e.body))}
		if e.dir {
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func writeTarFile(tw *tar.Writer, name string, body []byte) error {
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	_, err := tw.Write(body)
	return err
}

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func blobPath(digest string) string { return path.Join("blobs", strings.Replace(digest, ":", "/", 1)) }
