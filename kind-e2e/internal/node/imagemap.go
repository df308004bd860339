package node

import (
	"fmt"
	"os"
	"path"
	"sort"
	"strings"
)

// ImageRule maps container images matching Glob (path.Match syntax, tried
// against the full image reference, with and without tag/digest) to a local
// Binary that plays the image's entrypoint.
type ImageRule struct {
	Glob   string `json:"glob"`
	Binary string `json:"binary"`
}

// ImageMap is an ordered list of rules; the first match wins.
type ImageMap []ImageRule

// ErrImageNotKnown is the waiting reason of a container whose image is not in
// the image map.
const ErrImageNotKnown = "ErrImageNotKnown"

// Resolve returns the binary for image, or an error that lists the map.
func (m ImageMap) Resolve(image string) (string, error) {
	candidates := []string{image, stripTagAndDigest(image)}
	for _, r := range m {
		for _, c := range candidates {
			if globMatch(r.Glob, c) {
				if _, err := os.Stat(r.Binary); err != nil {
					return "", fmt.Errorf("image %q maps to %s, which is missing (build it: go tool task build)", image, r.Binary)
				}
				return r.Binary, nil
			}
		}
	}
	return "", fmt.Errorf("image %q is not in devcluster's image map (known: %s); add one with devcluster up --image 'GLOB=BINARY'", image, m.String())
}

// String lists the rules as glob=binary, sorted.
func (m ImageMap) String() string {
	var parts []string
	for _, r := range m {
		parts = append(parts, r.Glob+"="+r.Binary)
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// ParseImageRule parses "GLOB=BINARY".
func ParseImageRule(s string) (ImageRule, error) {
	glob, bin, ok := strings.Cut(s, "=")
	if !ok || glob == "" || bin == "" {
		return ImageRule{}, fmt.Errorf("image rule %q: want GLOB=BINARY", s)
	}
	if _, err := path.Match(glob, ""); err != nil {
		return ImageRule{}, fmt.Errorf("image rule %q: bad glob: %w", s, err)
	}
	return ImageRule{Glob: glob, Binary: bin}, nil
}

// globMatch is path.Match where * also crosses "/", so that
// "*tailplane/proxy*" matches "ghcr.io/tailplane/proxy:v1".
func globMatch(glob, s string) bool {
	ok, _ := path.Match(strings.ReplaceAll(glob, "/", "|"), strings.ReplaceAll(s, "/", "|"))
	return ok
}

func stripTagAndDigest(image string) string {
	if i := strings.Index(image, "@"); i >= 0 {
		image = image[:i]
	}
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		image = image[:i]
	}
	return image
}
