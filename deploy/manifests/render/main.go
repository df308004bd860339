// Command render writes deploy/manifests' plain manifests from the Helm chart
// in deploy/chart (default values, OAuth placeholders): the chart is their one
// source. `go tool task manifests:render` runs it; a test in deploy/manifests
// fails when the files are out of date.
//
// It imports deploy/chart and charmbracelet/log.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/charmbracelet/log"

	"github.com/tailplane/tailplane/deploy/chart"
)

func main() {
	out := flag.String("out", "deploy/manifests", "folder to write the manifests into")
	flag.Parse()
	logger := log.NewWithOptions(os.Stderr, log.Options{Prefix: "manifests:render"})
	if err := run(context.Background(), *out); err != nil {
		logger.Error(err.Error())
		os.Exit(1)
	}
}

func run(ctx context.Context, out string) error {
	files, err := chart.PlainManifests(ctx)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if err := os.WriteFile(filepath.Join(out, name), files[name], 0o644); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
		fmt.Println(filepath.Join(out, name))
	}
	return nil
}
