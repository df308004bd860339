package official

import "cmp"

// OfficialVersion is the tailscale.com version whose operator, proxy and
// chart the harness builds: the version the product pins.
const OfficialVersion = "v1.102.5"

// The official images, named as the official chart refers to them
// (containerd reads tailscale/k8s-operator as docker.io/tailscale/...).
const (
	OfficialImageRepo    = "docker.io/tailscale"
	OfficialOperatorName = "k8s-operator"
	OfficialProxyName    = "tailscale"
)

// Namespaces, classes and names of the two installs. The official operator
// keeps the seed's IngressClass and loadBalancerClass (tailscale; its
// loadBalancerClass is hard-coded); Tailplane serves its own (tailplane) so
// that both run at once on one cluster.
const (
	OfficialNamespace  = "tailscale-official"
	OfficialRelease    = "tailscale-operator"
	OfficialClass      = "tailscale"
	OfficialProxyClass = "official"
	OfficialHostname   = "tailscale-operator-official"

	TailplaneNamespace = "tailscale"
	TailplaneClass     = "tailplane"
)

// TailnetEnv is devcluster's tailnet.env: the tailnet's OAuth client, control
// URL, ACME directory and CA files.
type TailnetEnv map[string]string

// podCAFile is the CA bundle a pod on the real node trusts devcluster's
// control server (port 443) and ACME server with.
func (e TailnetEnv) podCAFile() string {
	return cmp.Or(e["TS_POD_ACME_CA_FILE"], e["TS_ACME_CA_FILE"])
}

// OfficialValues are the official chart's values for devcluster: its OAuth
// client and login server, the images the harness built (pulled never: no
// registry is reachable), the IngressClass tailscale, a default ProxyClass
// (OfficialProxyClass, see ProxyClass) and an operator hostname of its own,
// so that its device does not collide with Tailplane's. The module's chart
// carries no CRDs (the release process adds them); Tailplane's chart has
// installed the same tailscale.com CRDs already.
func OfficialValues(env TailnetEnv) map[string]any {
	operator := map[string]any{
		"image":    map[string]any{"repository": "tailscale/" + OfficialOperatorName, "tag": OfficialVersion, "pullPolicy": "IfNotPresent"},
		"hostname": OfficialHostname,
		"logging":  "info",
	}
	if ca := env.podCAFile(); ca != "" {
		// The control server's port 443 and the ACME server are signed by
		// devcluster's CA, which pods find in their service-account bundle.
		operator["extraEnv"] = []any{map[string]any{"name": "SSL_CERT_FILE", "value": ca}}
	}
	return map[string]any{
		"oauth":          map[string]any{"clientId": env["TS_API_CLIENT_ID"], "clientSecret": env["TS_API_CLIENT_SECRET"]},
		"loginServer":    env["TS_CONTROL_URL"],
		"installCRDs":    false,
		"operatorConfig": operator,
		"ingressClass":   map[string]any{"name": OfficialClass, "enabled": true},
		"proxyConfig": map[string]any{
			"image": map[string]any{"repository": "tailscale/" + OfficialProxyName, "tag": OfficialVersion},
			// nftables through netlink: the image holds no iptables binary.
			"firewallMode":      "nftables",
			"defaultProxyClass": OfficialProxyClass,
		},
	}
}

// TailplaneValues are Tailplane's chart values for the side-by-side run,
// added to devinstall's own (it reads them from the devcluster folder's
// values.yaml): the IngressClass and loadBalancerClass tailplane.
// devinstall's CA file for the operator is a chart value
// (proxyConfig.acmeCAFile), which extraEnv leaves alone.
func TailplaneValues() map[string]any {
	extraEnv := []any{map[string]any{"name": "OPERATOR_LOAD_BALANCER_CLASS", "value": TailplaneClass}}
	return map[string]any{
		"ingressClass":   map[string]any{"name": TailplaneClass, "enabled": true},
		"operatorConfig": map[string]any{"logging": "dev", "extraEnv": extraEnv},
	}
}

// ProxyClass is the official operator's default ProxyClass: its proxies get
// devcluster's ACME directory and CA (the official operator has no setting
// for every proxy, so TS_ env here, with its CustomTSEnvVar Warning; devinstall
// gives Tailplane's proxies the same through chart values), and pull no image (the official proxy skeleton says Always,
// and no registry is reachable).
func ProxyClass(env TailnetEnv) map[string]any {
	proxyEnv := []any{map[string]any{"name": "TS_DEBUG_ACME_DIRECTORY_URL", "value": env["TS_DEBUG_ACME_DIRECTORY_URL"]}}
	if ca := env.podCAFile(); ca != "" {
		proxyEnv = append(proxyEnv, map[string]any{"name": "SSL_CERT_FILE", "value": ca})
	}
	return map[string]any{
		"apiVersion": "tailscale.com/v1alpha1", "kind": "ProxyClass",
		"metadata": map[string]any{"name": OfficialProxyClass},
		"spec": map[string]any{"statefulSet": map[string]any{"pod": map[string]any{
			"tailscaleContainer":     map[string]any{"env": proxyEnv, "imagePullPolicy": "IfNotPresent"},
			"tailscaleInitContainer": map[string]any{"imagePullPolicy": "IfNotPresent"},
		}}},
	}
}
