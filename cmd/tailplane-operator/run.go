package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/log"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/tailplane/tailplane/handlers"
	"github.com/tailplane/tailplane/handlers/egress"
	"github.com/tailplane/tailplane/handlers/lib/cluster"
	"github.com/tailplane/tailplane/handlers/lib/opmetrics"
	"github.com/tailplane/tailplane/handlers/lib/settings"
	"github.com/tailplane/tailplane/internal/proxystate"
	"github.com/tailplane/tailplane/internal/tailnet"
	"github.com/tailplane/tailplane/internal/tslog"
	"github.com/tailplane/tailplane/runtime"
)

// Settings of the operator process itself (not the handlers'), Tailplane's
// own names.
const (
	envHealthAddr     = "TAILPLANE_HEALTH_ADDR"     // /healthz, /readyz; default $POD_IP:8081 (else :8081)
	envMetricsAddr    = "TAILPLANE_METRICS_ADDR"    // /metrics; default $POD_IP:8080 (else :8080)
	envLeaderElection = "TAILPLANE_LEADER_ELECTION" // default true
	envWorkers        = "TAILPLANE_WORKERS"         // default 4
	envWatchNamespace = "TAILPLANE_WATCH_NAMESPACE" // serve one namespace only; default all
	envKubeQPS        = "TAILPLANE_KUBE_QPS"        // API requests/s per client (burst twice that); default 100
	envDeviceTimeout  = "TAILPLANE_DEVICE_TIMEOUT"  // bound of the wait for the operator's tailnet device; default 5m
	envTempDir        = "TMPDIR"                    // where the device's scratch folder goes; default /tmp
	envDevice         = "TAILPLANE_OPERATOR_DEVICE" // false: no tailnet device of its own (API-only test doubles); default true
	envSuccessEvents  = "TAILPLANE_SUCCESS_EVENTS"  // true: a Normal "Handled" Event per successful handler run; default false, as the official operator
	envPodIP          = "POD_IP"
	envPodName        = "POD_NAME"
	envKubeconfig     = "KUBECONFIG"
	// leaseName is the leader-election Lease in OPERATOR_NAMESPACE.
	leaseName = "tailplane-operator"
	// verifyTimeout bounds the startup credentials check.
	verifyTimeout = 30 * time.Second
)

// verifiedBackend is a tailnet backend with the startup check.
type verifiedBackend interface {
	tailnet.Backend
	Verify(ctx context.Context) error
}

// newBackend returns the backend the settings choose (Headscale's API when
// HEADSCALE_URL is set, else the Tailscale API with the OAuth client) once
// its credentials passed the startup check.
func newBackend(ctx context.Context, s settings.Settings) (tailnet.Backend, error) {
	var backend verifiedBackend
	var creds string
	var err error
	if s.HeadscaleURL != "" {
		backend, err = tailnet.NewHeadscaleFromFile(s.HeadscaleURL, s.HeadscaleAPIKeyFile, s.HeadscaleUser)
		creds = "the Headscale API key (" + s.HeadscaleAPIKeyFile + ")"
	} else if s.ClientID != "" {
		backend, err = tailnet.NewTailscaleFederated(s.LoginServer, s.ClientID, s.IDTokenFile)
		creds = "the workload identity client " + s.ClientID + " (its identity token " + s.IDTokenFile + ")"
	} else {
		backend, err = tailnet.NewTailscaleFromFiles(s.LoginServer, s.ClientIDFile, s.ClientSecretFile)
		creds = "the OAuth client credentials (" + s.ClientIDFile + ", " + s.ClientSecretFile + ")"
	}
	if err != nil {
		return nil, fmt.Errorf("tailnet credentials: %w", err)
	}
	vctx, cancel := context.WithTimeout(ctx, verifyTimeout)
	err = backend.Verify(vctx)
	cancel()
	if err != nil {
		if tailnet.IsUnauthorized(err) {
			return nil, fmt.Errorf("the tailnet API at %s rejected %s: %w", backend.LoginServer(), creds, err)
		}
		return nil, fmt.Errorf("startup check against the tailnet API at %s failed: %w", backend.LoginServer(), err)
	}
	return backend, nil
}

// run reads the settings, checks the credentials, brings up the operator's
// own tailnet device and runs the operator until ctx ends. Every startup
// failure is one line.
func run(ctx context.Context, getenv func(string) string, stderr io.Writer) error {
	if getenv(envGatewayAPICRDs) != "" {
		return installGatewayAPICRDs(ctx, getenv, stderr)
	}
	s, err := settings.FromEnv(getenv)
	if err != nil {
		return fmt.Errorf("invalid settings: %s", strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	ls, err := tslog.FromEnv(getenv)
	if err != nil {
		return fmt.Errorf("invalid settings: %w", err)
	}
	logger := newLogger(stderr, s.Logging, ls.JSON)
	// klog's logger is process-wide; run is the process's main logic.
	tslog.RouteKlog(logger)
	backend, err := newBackend(ctx, s)
	if err != nil {
		return err
	}
	cfg, err := kubeConfig(getenv(envKubeconfig))
	if err != nil {
		return err
	}
	if v := getenv(envKubeQPS); v != "" {
		qps, err := strconv.Atoi(v)
		if err != nil || qps < 1 {
			return fmt.Errorf("%s: %q is not a positive number", envKubeQPS, v)
		}
		cfg.QPS, cfg.Burst = float32(qps), 2*qps
	}
	rs, err := runtimeSettings(getenv, s.Namespace, logger)
	if err != nil {
		return err
	}
	op, err := runtime.New(cfg, rs)
	if err != nil {
		return fmt.Errorf("runtime: %w", err)
	}
	// The tailnet API's calls are counted from here on (the startup check
	// above is not).
	metrics, err := opmetrics.New(op.Registry())
	if err != nil {
		return err
	}
	backend = metrics.Tailnet(backend)
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	if uninstall, err := uninstallWanted(getenv); err != nil || uninstall {
		if err != nil {
			return err
		}
		return forgetDevice(ctx, kube, backend, s.Namespace, s.OperatorSecret, logger)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	var deps *cluster.Deps
	withDevice, err := deviceWanted(getenv)
	if err != nil {
		return err
	}
	proxyMode, err := apiServerProxyMode(getenv)
	if err != nil {
		return err
	}
	var proxy *apiProxy
	if proxyMode != "" {
		if !withDevice {
			return fmt.Errorf("%s needs the operator's tailnet device, and %s is false", envAPIServerProxy, envDevice)
		}
		proxy = &apiProxy{upstream: rest.CopyConfig(cfg), mode: proxyMode, log: logger}
	}
	if withDevice {
		dev, err := deviceFromEnv(getenv, s, backend, kube, logger, ls.TsnetDebug)
		if err != nil {
			return err
		}
		defer dev.close()
		if err := startDeviceFirst(op, dev, proxy, stop, func(id string) { deps.OperatorNodeID = id }); err != nil {
			return err
		}
	} else {
		logger.Warn("running without a tailnet device of its own (" + envDevice + "=false)")
	}
	deps = cluster.NewDeps(op, kube, dyn, backend, s, logger)
	deps.Metrics = metrics
	if b, err := os.ReadFile("/etc/resolv.conf"); err == nil {
		deps.ClusterDomain = egress.ClusterDomain(string(b))
	}
	deps.WatchNamespace = strings.TrimSpace(getenv(envWatchNamespace))
	if s.HandBack {
		handlers.RegisterHandBack(op, deps)
		logger.Warn("handing every proxy back to the official operator (" + settings.EnvHandBack + "=true): nothing else is handled")
	} else {
		handlers.Register(op, deps)
	}
	logger.Info("starting", "namespace", s.Namespace, "loginServer", backend.LoginServer(), "proxyImage", s.ProxyImage)
	err = op.Run(ctx)
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return err
}

// runtimeSettings are the runtime's settings from the environment.
func runtimeSettings(getenv func(string) string, namespace string, logger *log.Logger) (runtime.Settings, error) {
	host := getenv(envPodIP)
	rs := runtime.Settings{
		Finalizer:      proxystate.Finalizer,
		FieldManager:   cluster.FieldManager,
		Component:      "tailscale-operator",
		HealthAddress:  orDefault(getenv(envHealthAddr), net.JoinHostPort(host, "8081")),
		MetricsAddress: orDefault(getenv(envMetricsAddr), net.JoinHostPort(host, "8080")),
		Logger:         logger,
	}
	var errs []error
	if v := getenv(envWorkers); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			errs = append(errs, fmt.Errorf("%s: %q is not a positive number", envWorkers, v))
		}
		rs.Workers = n
	}
	// The official operator posts Events for problems and changes, not
	// for every successful reconcile; a Handled Event per cycle would
	// bury them.
	rs.QuietSuccess = true
	if v := getenv(envSuccessEvents); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %q is not a boolean", envSuccessEvents, v))
		}
		rs.QuietSuccess = !b
	}
	le := true
	if v := getenv(envLeaderElection); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %q is not a boolean", envLeaderElection, v))
		}
		le = b
	}
	if le {
		id := getenv(envPodName)
		if id == "" {
			id, _ = os.Hostname()
		}
		rs.LeaderElection = &runtime.LeaderElection{Namespace: namespace, Name: leaseName, Identity: id}
	}
	return rs, errors.Join(errs...)
}

// newLogger follows OPERATOR_LOGGING for the level (info; debug and dev
// log at debug level) and TAILPLANE_LOG_FORMAT for the format.
func newLogger(w io.Writer, level string, json bool) *log.Logger {
	logger := tslog.New(w, json)
	if level != "info" {
		logger.SetLevel(log.DebugLevel)
	}
	return logger
}

func kubeConfig(kubeconfig string) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes client config: %w", err)
	}
	// The defaults (5 qps) would make 500 Services take minutes.
	cfg.QPS, cfg.Burst = 100, 200
	return cfg, nil
}

func orDefault(v, def string) string {
	if v = strings.TrimSpace(v); v != "" {
		return v
	}
	return def
}

func deviceWanted(getenv func(string) string) (bool, error) {
	return boolEnv(getenv, envDevice, true)
}

// boolEnv reads the boolean environment variable name, def when unset.
func boolEnv(getenv func(string) string, name string, def bool) (bool, error) {
	v := getenv(name)
	if v == "" {
		return def, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%s: %q is not a boolean", name, v)
	}
	return b, nil
}

// deviceFromEnv configures the operator's tailnet device.
func deviceFromEnv(getenv func(string) string, s settings.Settings, backend tailnet.Backend, kube kubernetes.Interface, logger *log.Logger, tsnetDebug bool) (*device, error) {
	timeout := defaultDeviceTimeout
	if v := getenv(envDeviceTimeout); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("%s: %q is not a positive duration", envDeviceTimeout, v)
		}
		timeout = d
	}
	return newDevice(deviceConfig{
		Hostname: s.OperatorHostname, Tags: s.OperatorInitialTags, ControlURL: backend.LoginServer(), Port: s.OperatorPort,
		Namespace: s.Namespace, Secret: s.OperatorSecret, Kube: kube, Backend: backend,
		TempDir: getenv(envTempDir), Timeout: timeout, Log: logger, TsnetDebug: tsnetDebug,
	}), nil
}

// startDeviceFirst registers the device's metrics, its /healthz entry, the
// startup hook that brings it up and the cleanup hook that stops it. Call it
// before the modules register their hooks: as in the official operator
// nothing is handled before the device runs, and setID runs before any
// handler can read the ID. Hooks run on the leader only, once per term of
// leadership, so two replicas never run one device: a replica that loses
// the Lease stops its device before it stands by. A failed startup hook
// ends Run (the runtime releases the Lease); fail records the device's error
// as the cause, so that run returns it without the runtime's wrapping.
//
// proxy, when not nil, is the API server proxy: it serves on the device
// while it runs, and stops before it closes.
func startDeviceFirst(op *runtime.Operator, dev *device, proxy *apiProxy, fail context.CancelCauseFunc, setID func(string)) error {
	for _, c := range dev.collectors() {
		if err := op.Registry().Register(c); err != nil {
			return fmt.Errorf("device metrics: %w", err)
		}
	}
	op.OnProbe("tailnetDevice", dev.probe)
	op.OnStartup(func(ctx context.Context) error {
		info, err := dev.up(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil // shutting down
			}
			fail(err)
			return err
		}
		setID(info.NodeID)
		if proxy != nil {
			if err := proxy.start(dev.server()); err != nil {
				fail(err)
				return err
			}
		}
		return nil
	})
	op.OnCleanup(func(ctx context.Context) error {
		if proxy != nil {
			proxy.stop(ctx)
		}
		dev.close()
		return nil
	})
	return nil
}
