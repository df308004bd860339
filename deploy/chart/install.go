package chart

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"helm.sh/helm/v3/pkg/action"
	helmchart "helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Options says how Install installs or upgrades the release.
type Options struct {
	// Values are the user's values (--set, -f), merged over values.yaml.
	Values map[string]any
	// Wait waits until every object is ready (--wait): the Deployment needs
	// a deployment controller for that.
	Wait bool
	// Timeout bounds the wait (--timeout); 0 means 5 minutes, Helm's default.
	Timeout time.Duration
	// TakeOwnership adopts objects that exist without Helm's ownership
	// annotations (--take-ownership), e.g. from `kubectl apply -f
	// deploy/manifests/`.
	TakeOwnership bool
	// Log receives Helm's messages; nil discards them.
	Log slog.Handler
}

// Install does what `helm upgrade --install tailscale-operator <chart>
// --namespace <namespace> --create-namespace` does: it installs the release
// when there is none, and upgrades it otherwise (values not given return to
// the chart's defaults).
func Install(ctx context.Context, cfg *rest.Config, namespace string, opts Options) (*release.Release, error) {
	c, err := Load()
	if err != nil {
		return nil, err
	}
	return InstallChart(ctx, cfg, c, ReleaseName, namespace, opts)
}

// InstallChart is Install for any chart c, as release releaseName
// (bench/official installs the official operator's chart with it).
func InstallChart(ctx context.Context, cfg *rest.Config, c *helmchart.Chart, releaseName, namespace string, opts Options) (*release.Release, error) {
	ac, err := actionConfig(cfg, namespace, opts.Log)
	if err != nil {
		return nil, err
	}
	timeout := opts.Timeout
	if timeout == 0 {
		timeout = 5 * time.Minute
	}
	history := action.NewHistory(ac)
	history.Max = 1
	var r *release.Release
	switch _, err := history.Run(releaseName); {
	case errors.Is(err, driver.ErrReleaseNotFound):
		in := action.NewInstall(ac)
		in.ReleaseName, in.Namespace, in.CreateNamespace = releaseName, namespace, true
		in.Wait, in.Timeout, in.TakeOwnership = opts.Wait, timeout, opts.TakeOwnership
		r, err = in.RunWithContext(ctx, c, opts.Values)
		if err != nil {
			return nil, fmt.Errorf("helm install %s: %w", releaseName, err)
		}
	case err != nil:
		return nil, fmt.Errorf("helm history %s: %w", releaseName, err)
	default:
		up := action.NewUpgrade(ac)
		up.Namespace = namespace
		up.Wait, up.Timeout, up.TakeOwnership = opts.Wait, timeout, opts.TakeOwnership
		r, err = up.RunWithContext(ctx, releaseName, c, opts.Values)
		if err != nil {
			return nil, fmt.Errorf("helm upgrade %s: %w", releaseName, err)
		}
	}
	return r, nil
}

// Uninstall is `helm uninstall RELEASE -n NAMESPACE --wait`: it deletes the
// release's objects, running its hooks, and waits until they are gone
// (opts.Timeout, default 5 minutes). Objects annotated
// helm.sh/resource-policy: keep stay. Only opts.Timeout and opts.Log are
// used.
func Uninstall(ctx context.Context, cfg *rest.Config, releaseName, namespace string, opts Options) error {
	ac, err := actionConfig(cfg, namespace, opts.Log)
	if err != nil {
		return err
	}
	un := action.NewUninstall(ac)
	un.Wait, un.Timeout = true, opts.Timeout
	if un.Timeout == 0 {
		un.Timeout = 5 * time.Minute
	}
	done := make(chan error, 1)
	go func() {
		_, err := un.Run(releaseName)
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("helm uninstall %s: %w", releaseName, err)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// actionConfig is Helm's configuration for releases in namespace of the
// cluster of cfg, with its messages as debug lines of logs (nil: dropped).
func actionConfig(cfg *rest.Config, namespace string, logs slog.Handler) (*action.Configuration, error) {
	if logs == nil {
		logs = slog.NewTextHandler(io.Discard, nil)
	}
	logger := slog.New(logs)
	ac := new(action.Configuration)
	if err := ac.Init(&restGetter{cfg: cfg, namespace: namespace}, namespace, "secret", func(format string, v ...any) {
		logger.Debug(fmt.Sprintf(format, v...))
	}); err != nil {
		return nil, fmt.Errorf("helm: %w", err)
	}
	return ac, nil
}

// restGetter gives Helm a cluster from a rest.Config (Helm's own getter
// reads kubeconfig files).
type restGetter struct {
	cfg       *rest.Config
	namespace string

	once      sync.Once
	discovery discovery.CachedDiscoveryInterface
	err       error
}

var _ genericclioptions.RESTClientGetter = (*restGetter)(nil)

func (g *restGetter) ToRESTConfig() (*rest.Config, error) { return rest.CopyConfig(g.cfg), nil }

func (g *restGetter) ToDiscoveryClient() (discovery.CachedDiscoveryInterface, error) {
	g.once.Do(func() {
		var dc *discovery.DiscoveryClient
		if dc, g.err = discovery.NewDiscoveryClientForConfig(g.cfg); g.err == nil {
			g.discovery = memory.NewMemCacheClient(dc)
		}
	})
	return g.discovery, g.err
}

func (g *restGetter) ToRESTMapper() (meta.RESTMapper, error) {
	dc, err := g.ToDiscoveryClient()
	if err != nil {
		return nil, err
	}
	return restmapper.NewShortcutExpander(restmapper.NewDeferredDiscoveryRESTMapper(dc), dc, nil), nil
}

// ToRawKubeConfigLoader only carries the namespace: everything else comes
// from the rest.Config.
func (g *restGetter) ToRawKubeConfigLoader() clientcmd.ClientConfig {
	return clientcmd.NewDefaultClientConfig(*clientcmdapi.NewConfig(),
		&clientcmd.ConfigOverrides{Context: clientcmdapi.Context{Namespace: g.namespace}})
}
