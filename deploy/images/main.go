// Command images builds Tailplane's container images without a container
// engine and pushes them (`go tool task images`, `go tool task images:push`).
//
//	images build [-out .cache/images] [-platforms linux/amd64,linux/arm64] [-tag latest]
//	images push -registry ghcr.io/me [-tag latest] [-in .cache/images] [-insecure]
//	images layout -out DIR -name NAME -bin PATH [-bin PATH ...] [-entrypoint PATH] [-user U] [-platform linux/amd64] [-tag latest] [-file SRC=DEST ...] [-link DEST=TARGET ...] [-path PATH]
//
// build writes one OCI image layout per binary (tailplane-operator,
// tailplane-proxy), each holding a multi-platform image index; push sends
// those indexes to <registry>/<name>:<tag> with the Docker config's
// credentials and prints each pushed reference with its digest. layout wraps
// binaries built elsewhere (bench/official's official Tailscale binaries) in
// one image of the same shape, written as an OCI layout in DIR/NAME; the
// product's images are not affected by it.
//
// It imports deploy/images/internal/imagebuild and charmbracelet/log.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/charmbracelet/log"

	"github.com/tailplane/tailplane/deploy/images/internal/imagebuild"
)

func main() {
	logger := log.NewWithOptions(os.Stderr, log.Options{Prefix: "images"})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, logger); err != nil {
		logger.Error(err.Error())
		os.Exit(1)
	}
}

const usage = "usage: images build [-out dir] [-platforms linux/amd64,linux/arm64] [-tag t] | images push -registry host/prefix [-tag t] [-in dir] [-insecure] | images layout -out dir -name n -bin path [-bin path ...] [-entrypoint path] [-user u] [-platform p] [-tag t] [-file src=dest ...] [-link dest=target ...] [-path PATH]"

func run(ctx context.Context, args []string, stdout io.Writer, logger *log.Logger) error {
	if len(args) == 0 {
		return fmt.Errorf("%s", usage)
	}
	switch args[0] {
	case "build":
		return build(ctx, args[1:], stdout, logger)
	case "push":
		return push(ctx, args[1:], stdout)
	case "layout":
		return layout(args[1:], stdout)
	default:
		return fmt.Errorf("unknown subcommand %q; %s", args[0], usage)
	}
}

func build(ctx context.Context, args []string, stdout io.Writer, logger *log.Logger) error {
	fs := flag.NewFlagSet("build", flag.ContinueOnError)
	out := fs.String("out", ".cache/images", "folder for the OCI image layouts, one per image")
	platforms := fs.String("platforms", "linux/amd64,linux/arm64", "comma-separated platforms")
	tag := fs.String("tag", "latest", "version label and layout ref name")
	module := fs.String("module", ".", "root of the Go module to build")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ps, err := imagebuild.ParsePlatforms(*platforms)
	if err != nil {
		return err
	}
	moduleDir, err := filepath.Abs(*module)
	if err != nil {
		return fmt.Errorf("module folder: %w", err)
	}
	start := time.Now()
	built, err := imagebuild.Build(ctx, imagebuild.Options{ModuleDir: moduleDir, Platforms: ps, Version: *tag, Logger: logger})
	if err != nil {
		return err
	}
	for _, b := range built {
		dir := filepath.Join(*out, b.Command.Name)
		if err := imagebuild.WriteLayout(dir, b.Index, *tag); err != nil {
			return err
		}
		digest, err := b.Index.Digest()
		if err != nil {
			return fmt.Errorf("%s: %w", b.Command.Name, err)
		}
		sizes, err := imagebuild.Sizes(b.Index)
		if err != nil {
			return fmt.Errorf("%s sizes: %w", b.Command.Name, err)
		}
		fmt.Fprintf(stdout, "%s %s %s\n", dir, *tag, digest)
		for _, s := range sizes {
			fmt.Fprintf(stdout, "  %-14s %6.1f MiB compressed\n", s.Platform.String(), float64(s.Bytes)/(1<<20))
		}
	}
	logger.Info("built", "images", len(built), "took", time.Since(start).Round(time.Millisecond))
	return nil
}

func push(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("push", flag.ContinueOnError)
	in := fs.String("in", ".cache/images", "folder of the OCI image layouts written by build")
	registry := fs.String("registry", "", "registry and prefix, e.g. ghcr.io/me or registry.lan:5000/tailplane")
	tag := fs.String("tag", "latest", "tag to push")
	insecure := fs.Bool("insecure", false, "allow plain HTTP to the registry")
	if err := fs.Parse(args); err != nil {
		return err
	}
	opts := imagebuild.PushOptions{Registry: *registry, Tag: *tag, Insecure: *insecure}
	for _, c := range imagebuild.DefaultCommands() {
		// Check every reference before sending anything.
		if _, err := imagebuild.Reference(opts, c.Name); err != nil {
			return err
		}
	}
	for _, c := range imagebuild.DefaultCommands() {
		idx, err := imagebuild.ReadLayout(filepath.Join(*in, c.Name))
		if err != nil {
			return err
		}
		ref, err := imagebuild.Push(ctx, idx, c.Name, opts)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s:%s@%s\n", ref.Context().Name(), *tag, ref.DigestStr())
	}
	return nil
}

// repeated is a flag that may be given several times.
type repeated []string

func (r *repeated) String() string     { return strings.Join(*r, ",") }
func (r *repeated) Set(v string) error { *r = append(*r, v); return nil }

func layout(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("layout", flag.ContinueOnError)
	out := fs.String("out", ".cache/images", "folder of the OCI image layouts; this one goes to OUT/NAME")
	name := fs.String("name", "", "image (and layout folder) name, e.g. k8s-operator")
	var bins repeated
	fs.Var(&bins, "bin", "a binary to put in "+imagebuild.BinDir+" (repeatable; the first is the default entrypoint)")
	entrypoint := fs.String("entrypoint", "", "the image's entrypoint (default "+imagebuild.BinDir+"/<first binary>)")
	user := fs.String("user", imagebuild.User, "user:group the image runs as")
	platform := fs.String("platform", "linux/amd64", "the binaries' platform")
	tag := fs.String("tag", "latest", "version label and layout ref name")
	description := fs.String("description", "", "description label")
	var files, links repeated
	fs.Var(&files, "file", "SRC=DEST: copy the host file SRC into the image at DEST, executable (repeatable)")
	fs.Var(&links, "link", "DEST=TARGET: a symbolic link at DEST to TARGET (repeatable)")
	pathEnv := fs.String("path", "", "the image's PATH (default "+imagebuild.BinDir+")")
	if err := fs.Parse(args); err != nil {
		return err
	}
	extra, err := extraFiles(files, links)
	if err != nil {
		return err
	}
	if *name == "" || len(bins) == 0 {
		return fmt.Errorf("layout needs -name and at least one -bin; %s", usage)
	}
	ps, err := imagebuild.ParsePlatforms(*platform)
	if err != nil {
		return err
	}
	if len(ps) != 1 {
		return fmt.Errorf("layout: -platform %q: give exactly one (the binaries are built for one)", *platform)
	}
	var ep []string
	if *entrypoint != "" {
		ep = []string{*entrypoint}
	}
	date, err := imagebuild.SourceDateFrom(context.Background(), ".", os.Getenv)
	if err != nil {
		return err
	}
	idx, err := imagebuild.BuildPrebuilt(imagebuild.Prebuilt{
		Name: *name, Binaries: bins, Entrypoint: ep, User: *user, Platform: ps[0],
		Version: *tag, Description: *description, SourceDate: date, Extra: extra, Path: *pathEnv,
	})
	if err != nil {
		return err
	}
	dir := filepath.Join(*out, *name)
	if err := imagebuild.WriteLayout(dir, idx, *tag); err != nil {
		return err
	}
	digest, err := idx.Digest()
	if err != nil {
		return fmt.Errorf("%s: %w", *name, err)
	}
	fmt.Fprintf(stdout, "%s %s %s\n", dir, *tag, digest)
	return nil
}

// extraFiles turns -file SRC=DEST and -link DEST=TARGET into the image's
// extra files.
func extraFiles(files, links []string) ([]imagebuild.ExtraFile, error) {
	var out []imagebuild.ExtraFile
	for _, f := range files {
		src, dest, ok := strings.Cut(f, "=")
		if !ok || src == "" || dest == "" {
			return nil, fmt.Errorf("layout: -file %q: want SRC=DEST", f)
		}
		out = append(out, imagebuild.ExtraFile{Path: dest, Source: src})
	}
	for _, l := range links {
		dest, target, ok := strings.Cut(l, "=")
		if !ok || dest == "" || target == "" {
			return nil, fmt.Errorf("layout: -link %q: want DEST=TARGET", l)
		}
		out = append(out, imagebuild.ExtraFile{Path: dest, Link: target})
	}
	return out, nil
}
