package imagebuild

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/log"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Command is one binary that becomes one image.
type Command struct {
	// Name is the binary's and the image's name, e.g. tailplane-operator.
	Name string
	// Package is the Go package to build, relative to the module, e.g.
	// ./cmd/tailplane-operator.
	Package string
	// Description goes into the org.opencontainers.image.description label.
	Description string
}

// DefaultCommands are Tailplane's two binaries.
func DefaultCommands() []Command {
	return []Command{
		{Name: "tailplane-operator", Package: "./cmd/tailplane-operator",
			Description: "Tailplane's Kubernetes operator: puts Services and Ingresses on a tailnet with the official Tailscale operator's API"},
		{Name: "tailplane-proxy", Package: "./cmd/tailplane-proxy",
			Description: "Tailplane's tsnet-backed proxy (L7/L4 ingress, egress, connector), created by the operator"},
	}
}

// DefaultPlatforms are those of k3s homelabs: amd64 and 64-bit ARM.
func DefaultPlatforms() []v1.Platform {
	return []v1.Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64", Variant: "v8"}}
}

// ParsePlatforms reads a comma-separated list such as
// "linux/amd64,linux/arm64". arm64 gets the variant v8, as registries and
// container runtimes commonly list it.
func ParsePlatforms(s string) ([]v1.Platform, error) {
	var out []v1.Platform
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		p, err := v1.ParsePlatform(f)
		if err != nil {
			return nil, fmt.Errorf("platform %q: %w", f, err)
		}
		if p.OS != "linux" || p.Architecture == "" || strings.Contains(p.Architecture, ":") {
			return nil, fmt.Errorf("platform %q: want linux/<arch>, e.g. linux/amd64", f)
		}
		if p.Architecture == "arm64" && p.Variant == "" {
			p.Variant = "v8"
		}
		out = append(out, *p)
	}
	if len(out) == 0 {
		return nil, errors.New("no platform given (e.g. linux/amd64,linux/arm64)")
	}
	return out, nil
}

// Options say what to build.
type Options struct {
	// ModuleDir is the root of the Go module (where go.mod is).
	ModuleDir string
	// Commands to build; DefaultCommands when empty.
	Commands []Command
	// Platforms of every image; DefaultPlatforms when empty.
	Platforms []v1.Platform
	// Version is the image's version label and the layout's ref name, e.g.
	// latest or 0.1.0.
	Version string
	// Revision is the source commit for the revision label; `git rev-parse
	// HEAD` in ModuleDir when empty.
	Revision string
	// SourceDate is every timestamp in the image; SourceDateFrom's answer
	// when zero.
	SourceDate time.Time
	// Source is the repository URL for the source label.
	Source string
	// Licenses is the SPDX expression for the licenses label; left out when
	// empty (the repository has no license file yet).
	Licenses string
	// Logger reports progress; required.
	Logger *log.Logger
}

// Built is one command's image index.
type Built struct {
	Command Command
	Index   v1.ImageIndex
}

// DefaultSource is the repository URL in the source label.
const DefaultSource = "https://github.com/tailplane/tailplane"

// Build cross-compiles every command for every platform and assembles one
// OCI image index per command.
func Build(ctx context.Context, opts Options) ([]Built, error) {
	if opts.Logger == nil || opts.ModuleDir == "" || opts.Version == "" {
		return nil, errors.New("imagebuild: Options.ModuleDir, Version and Logger are required")
	}
	if len(opts.Commands) == 0 {
		opts.Commands = DefaultCommands()
	}
	if len(opts.Platforms) == 0 {
		opts.Platforms = DefaultPlatforms()
	}
	if opts.Source == "" {
		opts.Source = DefaultSource
	}
	if opts.Revision == "" {
		rev, err := gitOutput(ctx, opts.ModuleDir, "rev-parse", "HEAD")
		if err != nil {
			return nil, fmt.Errorf("source revision (set it explicitly outside a git checkout): %w", err)
		}
		opts.Revision = rev
	}
	if opts.SourceDate.IsZero() {
		d, err := SourceDateFrom(ctx, opts.ModuleDir, os.Getenv)
		if err != nil {
			return nil, err
		}
		opts.SourceDate = d
	}
	opts.SourceDate = opts.SourceDate.UTC()

	binDir, err := os.MkdirTemp("", "tailplane-images-")
	if err != nil {
		return nil, fmt.Errorf("scratch folder: %w", err)
	}
	defer os.RemoveAll(binDir)

	images := make(map[string][]platformImage, len(opts.Commands))
	for _, p := range opts.Platforms {
		dir := filepath.Join(binDir, strings.ReplaceAll(p.String(), "/", "-"))
		start := time.Now()
		if err := compile(ctx, opts.ModuleDir, p, opts.Commands, opts.Version, dir); err != nil {
			return nil, err
		}
		opts.Logger.Info("compiled", "platform", p.String(), "took", time.Since(start).Round(time.Millisecond))
		for _, c := range opts.Commands {
			img, err := platformImageOf(c, p, filepath.Join(dir, c.Name), opts)
			if err != nil {
				return nil, fmt.Errorf("%s for %s: %w", c.Name, p, err)
			}
			images[c.Name] = append(images[c.Name], platformImage{platform: p, image: img})
		}
	}
	out := make([]Built, 0, len(opts.Commands))
	for _, c := range opts.Commands {
		idx, err := indexOf(images[c.Name], labels(c, opts))
		if err != nil {
			return nil, fmt.Errorf("%s index: %w", c.Name, err)
		}
		out = append(out, Built{Command: c, Index: idx})
	}
	return out, nil
}

// SourceDateFrom is the reproducible build date: SOURCE_DATE_EPOCH (seconds
// since 1970, the reproducible-builds.org convention) when set, else the
// commit time of HEAD in dir.
func SourceDateFrom(ctx context.Context, dir string, getenv func(string) string) (time.Time, error) {
	if v := strings.TrimSpace(getenv("SOURCE_DATE_EPOCH")); v != "" {
		secs, err := strconv.ParseInt(v, 10, 64)
		if err != nil || secs < 0 {
			return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH: %q is not a number of seconds since 1970", v)
		}
		return time.Unix(secs, 0).UTC(), nil
	}
	ct, err := gitOutput(ctx, dir, "log", "-1", "--format=%ct", "HEAD")
	if err != nil {
		return time.Time{}, fmt.Errorf("source date (set SOURCE_DATE_EPOCH outside a git checkout): %w", err)
	}
	secs, err := strconv.ParseInt(ct, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("source date: commit time %q: %w", ct, err)
	}
	return time.Unix(secs, 0).UTC(), nil
}

// labels are the OCI annotations of one command's images and index.
func labels(c Command, opts Options) map[string]string {
	l := map[string]string{
		"org.opencontainers.image.title":       c.Name,
		"org.opencontainers.image.description": c.Description,
		"org.opencontainers.image.source":      opts.Source,
		"org.opencontainers.image.url":         opts.Source,
		"org.opencontainers.image.revision":    opts.Revision,
		"org.opencontainers.image.version":     opts.Version,
		"org.opencontainers.image.created":     opts.SourceDate.Format(time.RFC3339),
	}
	if opts.Licenses != "" {
		l["org.opencontainers.image.licenses"] = opts.Licenses
	}
	return l
}
