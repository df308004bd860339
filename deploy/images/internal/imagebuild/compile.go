package imagebuild

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/tailplane/tailplane/internal/version"
)

// compile cross-compiles the commands for one platform into outDir (one file
// per command, named after its folder) with `go build`. The flags are those of
// a release build: static (CGO_ENABLED=0), no local paths (-trimpath), no
// symbol table or DWARF (-s -w), and the version stamped (--version prints
// it). The Go build cache is used, so a second build of unchanged source
// takes seconds.
func compile(ctx context.Context, moduleDir string, p v1.Platform, commands []Command, ver, outDir string) error {
	args := []string{"build", "-trimpath", "-ldflags=-s -w -X " + version.Symbol + "=" + ver, "-o", outDir + string(filepath.Separator)}
	for _, c := range commands {
		args = append(args, c.Package)
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = moduleDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Architecture)
	if p.Architecture == "arm" && strings.HasPrefix(p.Variant, "v") {
		cmd.Env = append(cmd.Env, "GOARM="+strings.TrimPrefix(p.Variant, "v"))
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build for %s: %w: %s", p, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// gitOutput runs git in dir and returns its trimmed output.
func gitOutput(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}
