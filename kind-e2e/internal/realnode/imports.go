package realnode

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// DefaultImportRepo is the repository prefix of images imported from OCI
// layouts that carry only a tag: deploy/images writes one layout per image,
// named after the image (tailplane-operator, tailplane-proxy), with the tag
// as its ref name, and the Helm chart's default images are
// ghcr.io/tailplane/<image>:<tag>.
const DefaultImportRepo = "ghcr.io/tailplane"

// imageNameAnnotation is the annotation containerd names an imported image
// after.
const imageNameAnnotation = "io.containerd.image.name"

// refNameAnnotation is an OCI layout's name for an entry (its tag).
const refNameAnnotation = "org.opencontainers.image.ref.name"

// Import is one image source given to `up --import`.
type Import struct {
	// Path is an image archive (a tar of an OCI layout or a `docker save`
	// file, imported as it names its images), an OCI layout folder, or a
	// folder of OCI layouts (what `go run ./deploy/images build -out DIR`
	// writes: DIR/tailplane-operator, DIR/tailplane-proxy).
	Path string
	// Repo prefixes the images of layouts whose entries have only a tag:
	// <Repo>/<layout folder name>:<tag>. Empty: DefaultImportRepo.
	Repo string
}

// importArchives turns each Import into the image archives to hand to
// `ctr images import`: archives as they are, layouts written as archives
// under work with each entry named (imageNameAnnotation). It returns the
// archives and the image names of the layouts.
func importArchives(imports []Import, work string) (archives, names []string, err error) {
	for _, im := range imports {
		repo := strings.TrimSuffix(im.Repo, "/")
		if repo == "" {
			repo = DefaultImportRepo
		}
		st, err := os.Stat(im.Path)
		if err != nil {
			return nil, nil, fmt.Errorf("import %s: %w", im.Path, err)
		}
		if !st.IsDir() {
			archives = append(archives, im.Path)
			continue
		}
		layouts := []string{im.Path}
		if _, err := os.Stat(filepath.Join(im.Path, "index.json")); err != nil {
			layouts = nil
			entries, err := os.ReadDir(im.Path)
			if err != nil {
				return nil, nil, fmt.Errorf("import %s: %w", im.Path, err)
			}
			for _, e := range entries {
				if _, err := os.Stat(filepath.Join(im.Path, e.Name(), "index.json")); e.IsDir() && err == nil {
					layouts = append(layouts, filepath.Join(im.Path, e.Name()))
				}
			}
			if len(layouts) == 0 {
				return nil, nil, fmt.Errorf("import %s: neither an OCI image layout (index.json) nor a folder of them (build them with go run ./deploy/images build -out %s)", im.Path, im.Path)
			}
		}
		for _, l := range layouts {
			base := repo + "/" + filepath.Base(l)
			archive := filepath.Join(work, filepath.Base(l)+".tar")
			named, err := layoutArchive(l, base, archive)
			if err != nil {
				return nil, nil, fmt.Errorf("import %s: %w", l, err)
			}
			archives = append(archives, archive)
			names = append(names, named...)
		}
	}
	return archives, names, nil
}

// layoutArchive writes the OCI layout in dir as an image archive, naming
// each entry of its index.json base:<ref name> (an entry whose ref name is
// a full reference keeps it; one that has an image name already keeps that).
// It returns the names.
func layoutArchive(dir, base, archive string) ([]string, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil {
		return nil, err
	}
	var index map[string]json.RawMessage
	if err := json.Unmarshal(raw, &index); err != nil {
		return nil, fmt.Errorf("index.json: %w", err)
	}
	var manifests []map[string]any
	if err := json.Unmarshal(index["manifests"], &manifests); err != nil {
		return nil, fmt.Errorf("index.json manifests: %w", err)
	}
	var names []string
	for _, m := range manifests {
		ann, _ := m["annotations"].(map[string]any)
		if ann == nil {
			ann = map[string]any{}
			m["annotations"] = ann
		}
		if n, ok := ann[imageNameAnnotation].(string); ok && n != "" {
			names = append(names, n)
			continue
		}
		ref, _ := ann[refNameAnnotation].(string)
		var name string
		switch {
		case ref == "":
			name = base + ":latest"
		case strings.ContainsAny(ref, "/:@"):
			name = ref
		default:
			name = base + ":" + ref
		}
		ann[imageNameAnnotation] = name
		names = append(names, name)
	}
	if len(names) == 0 {
		return nil, errors.New("index.json lists no image")
	}
	index["manifests"], err = json.Marshal(manifests)
	if err != nil {
		return nil, err
	}
	newIndex, err := json.Marshal(index)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(archive), 0o755); err != nil {
		return nil, err
	}
	f, err := os.Create(archive)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(f)
	werr := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if rel == "index.json" {
			return writeTarFile(tw, rel, newIndex)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: rel, Mode: 0o644, Size: info.Size(), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		src, err := os.Open(p)
		if err != nil {
			return err
		}
		defer src.Close()
		_, err = io.Copy(tw, src)
		return err
	})
	if err := errors.Join(werr, tw.Close(), f.Close()); err != nil {
		return nil, err
	}
	return names, nil
}

func writeTarFile(tw *tar.Writer, name string, body []byte) error {
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	_, err := tw.Write(body)
	return err
}
