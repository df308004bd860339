// Command tailplane-plugin is the plugin author's tool behind `go tool task
// plugin:build` and `plugin:push`, so that neither needs Docker:
//
//	tailplane-plugin build [-wd DIR] [-o FILE] PLUGIN_DIR
//	    GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared in PLUGIN_DIR
//	    (default output PLUGIN_DIR/plugin.wasm); prints its size and sha256.
//	tailplane-plugin push [-wd DIR] -ref REF FILE_OR_PLUGIN_DIR
//	    pushes the module as an OCI artifact of one layer (Istio's wasm
//	    format) with go-containerregistry; prints the reference with its
//	    manifest digest and the module's sha256 for spec.module.
//
// Relative paths are resolved against -wd (the task passes the caller's
// working directory). Credentials come from the Docker config
// (~/.docker/config.json); loopback and private-address registries, such
// as devcluster's, are spoken to over plain HTTP.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/tailplane/tailplane/plugins/host"
	"github.com/tailplane/tailplane/plugins/remote"
)

const usage = `usage:
  tailplane-plugin build [-wd DIR] [-o FILE] PLUGIN_DIR
  tailplane-plugin push [-wd DIR] -ref REGISTRY/NAME:TAG FILE_OR_PLUGIN_DIR
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var err error
	switch os.Args[1] {
	case "build":
		err = build(ctx, os.Args[2:])
	case "push":
		err = push(ctx, os.Args[2:])
	default:
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "tailplane-plugin:", err)
		os.Exit(1)
	}
}

func resolve(wd, p string) string {
	if filepath.IsAbs(p) || wd == "" {
		return p
	}
	return filepath.Join(wd, p)
}

func build(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("build", flag.ExitOnError)
	wd := fs.String("wd", "", "directory relative paths start from (default: the current one)")
	out := fs.String("o", "", "output file (default PLUGIN_DIR/plugin.wasm)")
	_ = fs.Parse(args)
	if fs.NArg() != 1 {
		return fmt.Errorf("build needs one plugin folder (DIR=...)")
	}
	dir := resolve(*wd, fs.Arg(0))
	target := filepath.Join(dir, "plugin.wasm")
	if *out != "" {
		target = resolve(*wd, *out)
	}
	target, err := filepath.Abs(target)
	if err != nil {
		return err
	}
	// c-shared: the host calls exports of an initialised reactor; a
	// command module would run main and exit.
	cmd := exec.CommandContext(ctx, "go", "build", "-buildmode=c-shared", "-trimpath", "-o", target, ".")
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build in %s: %w", dir, err)
	}
	b, err := os.ReadFile(target)
	if err != nil {
		return err
	}
	fmt.Printf("built %s (%d bytes, sha256 %s)\n", target, len(b), host.Digest(b))
	return nil
}

func push(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("push", flag.ExitOnError)
	wd := fs.String("wd", "", "directory relative paths start from (default: the current one)")
	ref := fs.String("ref", "", "where to push: REGISTRY/NAME:TAG (oci:// optional)")
	_ = fs.Parse(args)
	if fs.NArg() != 1 || *ref == "" {
		return fmt.Errorf("push needs -ref (REF=...) and a module file or plugin folder (DIR=... or FILE=...)")
	}
	file := resolve(*wd, fs.Arg(0))
	if st, err := os.Stat(file); err == nil && st.IsDir() {
		file = filepath.Join(file, "plugin.wasm")
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("%w (build it first: go tool task plugin:build DIR=...)", err)
	}
	p, err := remote.Push(ctx, *ref, b, remote.PushOptions{})
	if err != nil {
		return err
	}
	fmt.Printf("pushed %s\nmodule sha256 %s\n\nspec:\n  module:\n    oci: {ref: %q}\n    sha256: %s\n", p.Ref, p.SHA256, "oci://"+remote.TrimScheme(*ref), p.SHA256)
	return nil
}
