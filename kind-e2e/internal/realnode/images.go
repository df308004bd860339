package realnode

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// Images the real node builds from its own binaries.
const (
	// PauseImage is the pod sandbox image (containerd's pinned sandbox).
	PauseImage = "devcluster.local/pause:latest"
	// EchoImage is devcluster-echo, under the name the suites use.
	EchoImage = "ghcr.io/tailplane/echo:dev"
)

// imageUser is the user images run as: the "nonroot" user of distroless
// images, like deploy/images' images, so the restricted Pod Security
// Standard's runAsNonRoot holds without a pod-level runAsUser.
const imageUser = "65532:65532"

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
	Platform    map[string]string `json:"platform,omitempty"`
}

// WriteBinaryImage writes an OCI image archive (the tar form of an OCI
// image layout) of one static binary as ref: one uncompressed layer with the
// binary in /usr/local/bin, passwd and group entries and a world-writable
// /tmp; the entrypoint is the binary. Times are fixed, so the same binary
// gives the same image.
func WriteBinaryImage(archive, ref, binary string) error {
	bin, err := os.ReadFile(binary)
	if err != nil {
		return fmt.Errorf("image %s: %w", ref, err)
	}
	name := filepath.Base(binary)
	layer, err := layerTar(name, bin)
	if err != nil {
		return fmt.Errorf("image %s: %w", ref, err)
	}
	layerDigest := digestOf(layer)
	config, err := json.Marshal(map[string]any{
		"architecture": runtime.GOARCH, "os": "linux",
		"config": map[string]any{
			"Entrypoint": []string{"/usr/local/bin/" + name},
			"User":       imageUser, "WorkingDir": "/",
			"Env": []string{"PATH=/usr/local/bin"},
		},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{layerDigest}},
	})
	if err != nil {
		return err
	}
	manifest, err := json.Marshal(map[string]any{
		"schemaVersion": 2, "mediaType": mediaManifest,
		"config": descriptor{MediaType: mediaConfig, Digest: digestOf(config), Size: int64(len(config))},
		"layers": []descriptor{{MediaType: mediaLayer, Digest: layerDigest, Size: int64(len(layer))}},
	})
	if err != nil {
		return err
	}
	tag := ref[strings.LastIndex(ref, ":")+1:]
	index, err := json.Marshal(map[string]any{
		"schemaVersion": 2, "mediaType": mediaIndex,
		"manifests": []descriptor{{
			MediaType: mediaManifest, Digest: digestOf(manifest), Size: int64(len(manifest)),
			// containerd names an imported image after the first, the OCI
			// layout's tag after the second.
			Annotations: map[string]string{"io.containerd.image.name": ref, "org.opencontainers.image.ref.name": tag},
			Platform:    map[string]string{"architecture": runtime.GOARCH, "os": "linux"},
		}},
	})
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	files := []struct {
		name string
		body []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", index},
		{blobPath(digestOf(manifest)), manifest},
		{blobPath(digestOf(config)), config},
		{blobPath(layerDigest), layer},
	}
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.body)), ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		if _, err := tw.Write(f.body); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(archive), 0o755); err != nil {
		return err
	}
	return os.WriteFile(archive, buf.Bytes(), 0o644)
}

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func blobPath(digest string) string { return path.Join("blobs", strings.Replace(digest, ":", "/", 1)) }

func layerTar(name string, bin []byte) ([]byte, error) {
	const (
		passwd = "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
		group  = "root:x:0:\nnonroot:x:65532:\n"
	)
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

// importImage loads an OCI archive into containerd's k8s.io namespace (the
// CRI's), unpacked for the node's snapshotter, as `kind load` does.
func importImage(ctx context.Context, ctr, socket, archive string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, ctr, "--address", socket, "--namespace", "k8s.io",
		"images", "import", "--local", "--platform", "linux/"+runtime.GOARCH, archive).CombinedOutput()
	if err != nil {
		return fmt.Errorf("import %s into containerd: %v: %s", archive, err, strings.TrimSpace(string(out)))
	}
	return nil
}
