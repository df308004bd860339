package main

import (
	"github.com/tailplane/tailplane/internal/cmdline"
	"github.com/tailplane/tailplane/internal/nameserver"
	"github.com/tailplane/tailplane/internal/tslog"
)

// usage is what --help prints: every environment variable the proxy reads
// (TestUsageNamesEveryVariable checks none is missing).
var usage = cmdline.Usage{
	Name:    "tailplane-proxy",
	Summary: "one Tailplane proxy on the tailnet (L7 or L4 ingress, egress, connector, API server proxy), as its config says",
	Extra: "  tailplane-proxy nameserver [-records FILE] [-listen ADDR] [-zone ZONE]\n" +
		"                           the DNSConfig nameserver instead (defaults " + nameserver.DefaultRecordsPath + ", " + nameserver.DefaultListen + ", " + nameserver.DefaultZone + ")",
	Docs: "docs/proxy-config.md describes every setting and the config.",
	Env: []cmdline.Var{
		{Name: envConfigSecret, Doc: "config Secret in POD_NAMESPACE"},
		{Name: envConfigFile, Doc: "or a config file (exactly one of the two)"},
		{Name: envStateSecret, Doc: "state Secret (default: a file in " + envStateDir + ")"},
		{Name: envStateDir, Doc: "tsnet's folder (/tmp/tailplane-proxy)"},
		{Name: envNamespace, Doc: "namespace of the Secrets (default: the service account's)"},
		{Name: envPodIP, Doc: "default host of the listen addresses (127.0.0.1)"},
		{Name: envPodUID, Doc: "recorded in the state Secret"},
		{Name: envLocalAddr, Doc: "/healthz and /metrics ($POD_IP:9002)"},
		{Name: envEgressHost, Doc: "host of the egress listeners ($POD_IP)"},
		{Name: envPublicAddr, Doc: "public listener standing in for Funnel (off)"},
		{Name: envDrainTimeout, Doc: "drain bound on SIGTERM (25s)"},
		{Name: envLogLevel, Doc: "debug, info (default), warn or error"},
		{Name: tslog.EnvFormat, Doc: "text (default) or json"},
		{Name: tslog.EnvTsnetLevel, Doc: "level of tsnet's own log: info (default) or debug"},
		{Name: envKubeconfig, Doc: "Kubernetes client configuration (default: in-cluster)"},
	},
}
