package official

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"path/filepath"
	"time"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/release"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/tailplane/tailplane/deploy/chart"
)

// ChartDir is the official chart in the tailscale.com module that the tools
// module at toolsDir requires (cmd/k8s-operator/deploy/chart), found with
// `go list -m` (it downloads the module when the cache lacks it).
func ChartDir(ctx context.Context, toolsDir string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "list", "-m", "-json", "tailscale.com")
	cmd.Dir = toolsDir
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", fmt.Errorf("go list -m tailscale.com in %s: %w: %s", toolsDir, err, ee.Stderr)
		}
		return "", fmt.Errorf("go list -m tailscale.com in %s: %w", toolsDir, err)
	}
	var m struct{ Version, Dir string }
	if err := json.Unmarshal(out, &m); err != nil {
		return "", fmt.Errorf("go list -m tailscale.com: %w", err)
	}
	if m.Version != OfficialVersion {
		return "", fmt.Errorf("%s requires tailscale.com %s, want %s", toolsDir, m.Version, OfficialVersion)
	}
	if m.Dir == "" {
		return "", fmt.Errorf("tailscale.com %s is not in the module cache (go mod download -C %s tailscale.com)", m.Version, toolsDir)
	}
	return filepath.Join(m.Dir, "cmd", "k8s-operator", "deploy", "chart"), nil
}

// RenderChart renders the chart in dir with values into namespace,
// client-side, as `helm template` does (deploy/chart's renderer); it returns
// the manifest.
func RenderChart(ctx context.Context, dir, namespace string, values map[string]any) (string, error) {
	c, err := loader.LoadDir(dir)
	if err != nil {
		return "", fmt.Errorf("load chart %s: %w", dir, err)
	}
	rel, err := chart.RenderChart(ctx, c, OfficialRelease, namespace, values)
	if err != nil {
		return "", err
	}
	return rel.Manifest, nil
}

// InstallChart is `helm upgrade --install RELEASE DIR -n NAMESPACE
// --create-namespace --wait` with deploy/chart's installer (the Helm SDK),
// against the cluster of kubeconfig.
func InstallChart(ctx context.Context, kubeconfig, dir, namespace, releaseName string, values map[string]any, timeout time.Duration, logs slog.Handler) (*release.Release, error) {
	c, err := loader.LoadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("load chart %s: %w", dir, err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	return chart.InstallChart(ctx, cfg, c, releaseName, namespace, chart.Options{Values: values, Wait: true, Timeout: timeout, Log: logs})
}
