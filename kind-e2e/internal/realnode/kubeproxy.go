package realnode

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// ServiceCIDR is the real node's Service range, in the same benchmarking
// block as PodCIDR: kube-proxy's iptables rules rewrite it in the pods'
// network namespaces, where the process node's loopback range would not work.
const ServiceCIDR = "198.19.128.0/20"

// kubeProxyConfig is kube-proxy in iptables mode (Debian's iptables, the
// nft backend), as on a kind node. conntrack.maxPerCore 0 leaves the
// machine's conntrack table size alone, and oomScoreAdj 0 asks for nothing
// a process without CAP_SYS_RESOURCE cannot get.
func kubeProxyConfig(kubeconfig, name string, healthz, metrics int) map[string]any {
	return map[string]any{
		"apiVersion":         "kubeproxy.config.k8s.io/v1alpha1",
		"kind":               "KubeProxyConfiguration",
		"mode":               "iptables",
		"clientConnection":   map[string]any{"kubeconfig": kubeconfig},
		"hostnameOverride":   name,
		"clusterCIDR":        PodCIDR,
		"healthzBindAddress": "127.0.0.1:" + strconv.Itoa(healthz),
		"metricsBindAddress": "127.0.0.1:" + strconv.Itoa(metrics),
		"conntrack":          map[string]any{"maxPerCore": 0},
		"oomScoreAdj":        0,
		"iptables":           map[string]any{"localhostNodePorts": false},
	}
}

// writeKubeProxyFiles writes kube-proxy's config and kubeconfig into
// dir/kube-proxy and returns its arguments.
func writeKubeProxyFiles(dir, name string, api APIServer, ports kubeletPorts) ([]string, error) {
	pdir := filepath.Join(dir, "kube-proxy")
	if err := os.MkdirAll(pdir, 0o755); err != nil {
		return nil, err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["devcluster"] = &clientcmdapi.Cluster{Server: api.URL, CertificateAuthorityData: api.CA}
	cfg.AuthInfos["kube-proxy"] = &clientcmdapi.AuthInfo{Token: api.Token}
	cfg.Contexts["devcluster"] = &clientcmdapi.Context{Cluster: "devcluster", AuthInfo: "kube-proxy"}
	cfg.CurrentContext = "devcluster"
	kubeconfig := filepath.Join(pdir, "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, kubeconfig); err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(kubeProxyConfig(kubeconfig, name, ports.ProxyHealthz, ports.ProxyMetrics), "", "  ")
	if err != nil {
		return nil, err
	}
	configFile := filepath.Join(pdir, "config.json")
	if err := os.WriteFile(configFile, b, 0o644); err != nil {
		return nil, err
	}
	return []string{"--config=" + configFile, "--v=1"}, nil
}

// cleanupKubeProxy removes kube-proxy's iptables chains and rules
// (`kube-proxy --cleanup`), so that no Service rule outlives the node.
func cleanupKubeProxy(bin string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--cleanup").CombinedOutput()
	if err != nil {
		return fmt.Errorf("kube-proxy --cleanup: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// cleanupKubeletChains removes the iptables chains the kubelet makes (the
// KUBE-FIREWALL localnet guard and its canaries), for IPv4 and IPv6; a
// chain that is not there is no error.
func cleanupKubeletChains() {
	steps := [][]string{
		{"-t", "filter", "-D", "INPUT", "-j", "KUBE-FIREWALL"},
		{"-t", "filter", "-D", "OUTPUT", "-j", "KUBE-FIREWALL"},
		{"-t", "filter", "-F", "KUBE-FIREWALL"},
		{"-t", "filter", "-X", "KUBE-FIREWALL"},
		{"-t", "filter", "-X", "KUBE-KUBELET-CANARY"},
		{"-t", "nat", "-X", "KUBE-KUBELET-CANARY"},
		{"-t", "mangle", "-X", "KUBE-KUBELET-CANARY"},
		{"-t", "mangle", "-X", "KUBE-IPTABLES-HINT"},
	}
	for _, tool := range []string{"iptables", "ip6tables"} {
		for _, args := range steps {
			_ = exec.Command(tool, args...).Run()
		}
	}
}
