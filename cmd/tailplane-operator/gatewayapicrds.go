package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"k8s.io/client-go/dynamic"

	"github.com/tailplane/tailplane/internal/gatewayapicrds"
	"github.com/tailplane/tailplane/internal/tslog"
)

// envGatewayAPICRDs, set to auto or true, makes the process install the
// Gateway API's experimental-channel CRDs (internal/gatewayapicrds) and
// exit: the chart's pre-install and pre-upgrade hook runs it with
// gatewayAPI.channel=experimental. It needs no tailnet credentials.
const envGatewayAPICRDs = "TAILPLANE_GATEWAY_API_CRDS"

// envRelease names the Helm release ("namespace/name") the hook runs for.
const envRelease = "TAILPLANE_RELEASE"

// gatewayAPICRDsTimeout bounds the install: helm waits for the hook.
const gatewayAPICRDsTimeout = 2 * time.Minute

// installGatewayAPICRDs is the process's work when envGatewayAPICRDs is set.
func installGatewayAPICRDs(ctx context.Context, getenv func(string) string, stderr io.Writer) error {
	mode, err := gatewayapicrds.ParseMode(getenv(envGatewayAPICRDs))
	if err != nil {
		return fmt.Errorf("%s: %w", envGatewayAPICRDs, err)
	}
	release := getenv(envRelease)
	if ns, name, ok := strings.Cut(release, "/"); !ok || ns == "" || name == "" {
		return fmt.Errorf("%s: %q is not <namespace>/<name> of a Helm release", envRelease, release)
	}
	ls, err := tslog.FromEnv(getenv)
	if err != nil {
		return fmt.Errorf("invalid settings: %w", err)
	}
	logger := newLogger(stderr, "info", ls.JSON)
	cfg, err := kubeConfig(getenv(envKubeconfig))
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	objs, err := gatewayapicrds.Objects()
	if err != nil {
		return fmt.Errorf("the embedded Gateway API CRDs: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, gatewayAPICRDsTimeout)
	defer cancel()
	res, err := gatewayapicrds.Install(ctx, dyn, objs, mode, release)
	for _, name := range res.LeftAlone {
		logger.Warn("Gateway API CRD left alone: installed by someone else (gatewayAPI.installCRDs=true takes it over)", "crd", name)
	}
	if err != nil {
		return fmt.Errorf("install the Gateway API's experimental CRDs: %w", err)
	}
	logger.Info("Gateway API experimental-channel CRDs installed", "applied", len(res.Applied), "leftAlone", len(res.LeftAlone), "release", release)
	return nil
}
