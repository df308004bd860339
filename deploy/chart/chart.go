// Package chart embeds Tailplane's Helm chart (tailplane-operator/, the one
// install path: `helm upgrade --install` for users, this package's Install for
// devcluster and tests) and renders it with the Helm SDK, as `helm template`
// does, including the plain manifests of deploy/manifests, which are generated
// from it.
//
// It imports the Helm SDK (helm.sh/helm/v3), client-go and cli-runtime;
// nothing of Tailplane's.
package chart

import (
	"context"
	"embed"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"helm.sh/helm/v3/pkg/action"
	helmchart "helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	kubefake "helm.sh/helm/v3/pkg/kube/fake"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
)

//go:embed all:tailplane-operator
var files embed.FS

const (
	// Name is the chart's name (and its folder).
	Name = "tailplane-operator"
	// ReleaseName is the release name the seed's install command uses.
	ReleaseName = "tailscale-operator"
	// Namespace is the operator's namespace in the seed's install command.
	Namespace = "tailscale"
)

// Load returns the embedded chart.
func Load() (*helmchart.Chart, error) {
	var bufs []*loader.BufferedFile
	err := fs.WalkDir(files, Name, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := files.ReadFile(path)
		if err != nil {
			return err
		}
		bufs = append(bufs, &loader.BufferedFile{Name: strings.TrimPrefix(path, Name+"/"), Data: b})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("chart: read embedded chart: %w", err)
	}
	c, err := loader.LoadFiles(bufs)
	if err != nil {
		return nil, fmt.Errorf("chart: load: %w", err)
	}
	return c, nil
}

// Render renders the chart with vals into namespace, client-side, exactly as
// `helm template` (and the first step of `helm install`) does: the values
// are checked against values.schema.json and by the templates' own checks.
// The returned release has the manifest and the notes; nothing is sent to a
// cluster.
func Render(ctx context.Context, namespace string, vals map[string]any) (*release.Release, error) {
	c, err := Load()
	if err != nil {
		return nil, err
	}
	return RenderChart(ctx, c, ReleaseName, namespace, vals)
}

// RenderChart is Render for any chart c, as release releaseName (bench/official
// renders the official operator's chart with it).
func RenderChart(ctx context.Context, c *helmchart.Chart, releaseName, namespace string, vals map[string]any) (*release.Release, error) {
	cfg := &action.Configuration{
		Releases:     storage.Init(driver.NewMemory()),
		KubeClient:   &kubefake.PrintingKubeClient{Out: io.Discard},
		Capabilities: chartutil.DefaultCapabilities,
		Log:          func(string, ...any) {},
	}
	install := action.NewInstall(cfg)
	install.DryRun, install.ClientOnly = true, true
	install.ReleaseName = releaseName
	install.Namespace = namespace
	install.Replace = true
	r, err := install.RunWithContext(ctx, c, vals)
	if err != nil {
		return nil, fmt.Errorf("render chart %s: %w", c.Name(), err)
	}
	return r, nil
}

// SplitBySource splits a rendered manifest into its templates' output, keyed
// by template path (such as "templates/deployment.yaml"), each document in
// the order Helm installs it.
func SplitBySource(manifest string) map[string]string {
	out := map[string]string{}
	const marker = "# Source: " + Name + "/"
	for _, doc := range strings.Split(manifest, "\n---\n") {
		doc = strings.TrimPrefix(strings.TrimSpace(doc), "---\n")
		first, rest, _ := strings.Cut(doc, "\n")
		path, ok := strings.CutPrefix(first, marker)
		if !ok {
			continue
		}
		if out[path] != "" {
			out[path] += "---\n"
		}
		out[path] += strings.TrimSpace(rest) + "\n"
	}
	return out
}
