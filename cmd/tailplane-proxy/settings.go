package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/charmbracelet/log"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"tailscale.com/ipn/store"

	"github.com/tailplane/tailplane/internal/kubestate"
	"github.com/tailplane/tailplane/proxy"
	"github.com/tailplane/tailplane/proxy/config"
	"github.com/tailplane/tailplane/proxy/configwatch"
	"github.com/tailplane/tailplane/proxy/metrics"
)

// The environment variables the proxy reads. Every listen address of its own
// defaults to the pod IP (POD_IP) when set, else to loopback.
const (
	envConfigSecret = "TAILPLANE_CONFIG_SECRET" // config Secret name (in POD_NAMESPACE)
	envConfigFile   = "TAILPLANE_CONFIG_FILE"   // or a config file, for local runs
	envStateSecret  = "TS_KUBE_SECRET"          // state Secret name (containerboot's name)
	envStateDir     = "TAILPLANE_STATE_DIR"     // tsnet folder; holds the state without a state Secret
	envNamespace    = "POD_NAMESPACE"
	envPodIP        = "POD_IP"
	envPodUID       = "POD_UID"
	envLocalAddr    = "TAILPLANE_LOCAL_ADDR"  // /healthz and /metrics, default $POD_IP:9002
	envEgressHost   = "TAILPLANE_EGRESS_HOST" // egress listeners, default $POD_IP
	envPublicAddr   = "TAILPLANE_PUBLIC_ADDR" // Funnel stand-in, default off
	envDrainTimeout = "TAILPLANE_DRAIN_TIMEOUT"
	envLogLevel     = "TAILPLANE_LOG_LEVEL"
	envKubeconfig   = "KUBECONFIG"
)

const saNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// optionsFromEnv builds the engine options from the environment.
func optionsFromEnv(ctx context.Context, getenv func(string) string, logger *log.Logger) (proxy.Options, error) {
	// One registry for the engine's and the plugin host's metrics.
	opts := proxy.Options{Logger: logger, Metrics: metrics.New()}
	if lvl := getenv(envLogLevel); lvl != "" {
		l, err := log.ParseLevel(lvl)
		if err != nil {
			return opts, fmt.Errorf("%s: %w", envLogLevel, err)
		}
		logger.SetLevel(l)
	}
	host := "127.0.0.1"
	if ip := getenv(envPodIP); ip != "" {
		host = ip
	}
	opts.LocalAddr = or(getenv(envLocalAddr), net.JoinHostPort(host, "9002"))
	opts.EgressHost = or(getenv(envEgressHost), host)
	opts.PublicAddr = getenv(envPublicAddr)
	opts.StateDir = or(getenv(envStateDir), "/tmp/tailplane-proxy")
	if err := os.MkdirAll(opts.StateDir, 0o700); err != nil {
		return opts, fmt.Errorf("%s: %w", envStateDir, err)
	}
	if d := getenv(envDrainTimeout); d != "" {
		v, err := time.ParseDuration(d)
		if err != nil {
			return opts, fmt.Errorf("%s: %w", envDrainTimeout, err)
		}
		opts.DrainTimeout = v
	}

	configSecret, configFile, stateSecret := getenv(envConfigSecret), getenv(envConfigFile), getenv(envStateSecret)
	if (configSecret == "") == (configFile == "") {
		return opts, fmt.Errorf("set exactly one of %s and %s", envConfigSecret, envConfigFile)
	}
	if configSecret != "" || stateSecret != "" {
		kube, cfg, err := kubeClient(getenv(envKubeconfig))
		if err != nil {
			return opts, err
		}
		opts.Kube = kube
		if getenv(envKubeconfig) != "" {
			// A local run's kube-apiserver role forwards to that cluster too.
			opts.APIServerUpstream = cfg
		}
		opts.Namespace = getenv(envNamespace)
		if opts.Namespace == "" {
			b, err := os.ReadFile(saNamespaceFile)
			if err != nil {
				return opts, fmt.Errorf("%s is not set and the service account namespace is unreadable: %w", envNamespace, err)
			}
			opts.Namespace = strings.TrimSpace(string(b))
		}
	}
	if configSecret != "" {
		opts.Source = &configwatch.Secret{Client: opts.Kube, Namespace: opts.Namespace, Name: configSecret, Key: config.SecretKey, Log: logger}
	} else {
		opts.Source = &configwatch.File{Path: configFile, Log: logger}
	}
	var status statusSetter
	if stateSecret != "" {
		st, err := kubestate.New(ctx, opts.Kube, opts.Namespace, stateSecret)
		if err != nil {
			return opts, err
		}
		if uid := getenv(envPodUID); uid != "" {
			if err := st.SetPodUID(ctx, uid); err != nil {
				return opts, err
			}
		}
		opts.State, opts.Status, opts.Peers = st, st, st
		status = st
	} else {
		st, err := store.NewFileStore(logger.Printf, opts.StateDir+"/tailscaled.state")
		if err != nil {
			return opts, fmt.Errorf("state file: %w", err)
		}
		opts.State = st
	}
	if opts.Kube != nil {
		// Routing plugins fetch their modules from the proxy's namespace.
		loader, err := newPluginLoader(opts.Kube, opts.Namespace, opts.StateDir+"/wasm-cache", status, opts.Metrics.Registry, logger)
		if err != nil {
			return opts, err
		}
		opts.PluginRouters = loader.routers
		go loader.watchFailures(ctx, failureTick)
	}
	return opts, nil
}

func kubeClient(kubeconfig string) (kubernetes.Interface, *rest.Config, error) {
	var cfg *rest.Config
	var err error
	if kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("kubernetes client: %w", err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return kube, cfg, nil
}

func or(v, def string) string {
	if v != "" {
		return v
	}
	return def
}
