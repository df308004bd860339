package main

import (
	"github.com/tailplane/tailplane/handlers/lib/settings"
	"github.com/tailplane/tailplane/internal/cmdline"
	"github.com/tailplane/tailplane/internal/tslog"
)

// usage is what --help prints: every environment variable the operator
// reads (TestUsageNamesEveryVariable checks none is missing).
var usage = cmdline.Usage{
	Name:    "tailplane-operator",
	Summary: "the Tailplane Kubernetes operator (a drop-in for Tailscale's)",
	Docs:    "docs/operator.md describes every setting.",
	Env: []cmdline.Var{
		{Name: settings.EnvNamespace, Doc: "namespace of the proxies' objects (default: the Pod's)"},
		{Name: settings.EnvLoginServer, Doc: "control server URL (default: Tailscale's)"},
		{Name: settings.EnvClientIDFile + ", " + settings.EnvClientSecretFile, Doc: "OAuth client credential files (" + settings.DefaultClientIDFile + ", " + settings.DefaultClientSecretFile + ")"},
		{Name: settings.EnvClientID, Doc: "a workload identity federation client instead of the files: its identity token is the ServiceAccount token projected at " + settings.DefaultIDTokenFile},
		{Name: settings.EnvServiceAccount, Doc: "the operator's ServiceAccount, whose tokens a Tailnet's Secret with an audience exchanges (" + settings.DefaultServiceAccount + ")"},
		{Name: settings.EnvHeadscaleURL + ", " + settings.EnvHeadscaleAPIKeyFile + ", " + settings.EnvHeadscaleUser, Doc: "Headscale as the control server"},
		{Name: settings.EnvProxyImage, Doc: "the proxies' image (" + settings.DefaultProxyImage + ")"},
		{Name: settings.EnvProxyTags, Doc: "default proxy tags (" + settings.DefaultProxyTags + ")"},
		{Name: settings.EnvIngressClassName, Doc: "IngressClass served (" + settings.DefaultIngressClassName + ")"},
		{Name: settings.EnvGatewayClassName, Doc: "GatewayClass created at start when missing (Gateway API installed; default none)"},
		{Name: settings.EnvLoadBalancerClass, Doc: "loadBalancerClass served (" + settings.DefaultLoadBalancerClass + ")"},
		{Name: settings.EnvDefaultProxyClass, Doc: "ProxyClass for objects that name none"},
		{Name: settings.EnvProxyACMEDirectoryURL + ", " + settings.EnvProxyACMECAFile, Doc: "ACME server for the proxies' certificates, and the CA file (in the pod) to trust it"},
		{Name: settings.EnvDefaultLoadBalancer, Doc: "true: also serve LoadBalancer Services without a class"},
		{Name: settings.EnvAdoptOfficial, Doc: "on (default): take over the devices of proxies the official operator left; dry-run: say what would be taken over; off: ignore them"},
		{Name: settings.EnvHandBack, Doc: "true: hand every proxy's device back to the official operator's layout, then handle nothing (docs/migration.md)"},
		{Name: settings.EnvLogging, Doc: "info, debug or dev (debug level)"},
		{Name: tslog.EnvFormat, Doc: "text (default) or json"},
		{Name: tslog.EnvTsnetLevel, Doc: "level of tsnet's own log: info (default) or debug"},
		{Name: envAPIServerProxy + ", " + envAuthProxy, Doc: "the API server proxy on the operator's device: true, noauth or false"},
		{Name: settings.EnvOperatorHostname, Doc: "the operator device's hostname (" + settings.DefaultOperatorHostname + ")"},
		{Name: settings.EnvOperatorInitialTags, Doc: "the operator device's tags (" + settings.DefaultOperatorTags + ")"},
		{Name: settings.EnvOperatorSecret, Doc: "Secret holding the device's state (default: a file)"},
		{Name: settings.EnvOperatorPort, Doc: "the device's WireGuard UDP port (default: any)"},
		{Name: envHealthAddr, Doc: "/healthz and /readyz ($POD_IP:8081; - is off)"},
		{Name: envMetricsAddr, Doc: "/metrics ($POD_IP:8080; - is off)"},
		{Name: envLeaderElection, Doc: "leader election on Lease " + leaseName + " (true)"},
		{Name: envWorkers, Doc: "objects handled at once (4)"},
		{Name: envKubeQPS, Doc: "Kubernetes API requests/s per client (100)"},
		{Name: envSuccessEvents, Doc: "true: a Normal Handled Event per successful run"},
		{Name: envWatchNamespace, Doc: "serve one namespace only (default: all)"},
		{Name: envDeviceTimeout, Doc: "bound of the wait for the operator's device (5m)"},
		{Name: envDevice, Doc: "false: no tailnet device of its own (test doubles)"},
		{Name: envUninstall, Doc: "true: delete the operator's own device and its state Secret, then exit (the chart's pre-delete hook)"},
		{Name: envGatewayAPICRDs, Doc: "auto or true: install the Gateway API's experimental-channel CRDs, then exit (the chart's pre-install hook with gatewayAPI.channel=experimental)"},
		{Name: envRelease, Doc: "with " + envGatewayAPICRDs + ": the Helm release, <namespace>/<name>"},
		{Name: envTempDir, Doc: "the device's scratch folder's parent (/tmp)"},
		{Name: envPodIP + ", " + envPodName, Doc: "the Pod's IP (listen addresses) and name (leader identity)"},
		{Name: envKubeconfig, Doc: "Kubernetes client configuration (default: in-cluster)"},
	},
}
