package realnode

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/tailplane/tailplane/kind-e2e/internal/pki"
)

// kubeletConfig is the KubeletConfiguration. What differs from a kind node,
// and why:
//   - failCgroupV1: false and the cgroupfs driver: this machine has cgroup v1
//     (hybrid) and no systemd managing cgroups; kubelet 1.37 refuses cgroup
//     v1 unless told not to.
//   - authentication by client certificate from devcluster's local CA only
//     (the kube-apiserver's kubelet client certificate) and AlwaysAllow: the
//     kubelet API is reachable only on NodeIP, from this machine.
//   - syncFrequency 10s (default 1m): a ConfigMap or Secret volume follows
//     its object within seconds instead of a minute or two (the DNSConfig
//     nameserver reads its records from one), at the cost of a pod sync
//     loop six times as often on one small node.
//   - eviction and image garbage collection thresholds near zero: a
//     developer's disk is often fuller than a kind node's, and evicting the
//     test's pods helps no one.
//   - maxPods (maxPods, default 110): the pods' address range, not the
//     kubelet's default, bounds this one node; bench/official exposes 100
//     Services per operator, a proxy pod each, next to the system pods and
//     the other side's pods still terminating.
func kubeletConfig(dir string, ports kubeletPorts, serving pki.Pair, clientCA, socket string) map[string]any {
	return map[string]any{
		"apiVersion":               "kubelet.config.k8s.io/v1beta1",
		"kind":                     "KubeletConfiguration",
		"failCgroupV1":             false,
		"cgroupDriver":             "cgroupfs",
		"containerRuntimeEndpoint": "unix://" + socket,
		"address":                  NodeIP,
		"port":                     ports.Server,
		"readOnlyPort":             0,
		"healthzBindAddress":       "127.0.0.1",
		"healthzPort":              ports.Healthz,
		"tlsCertFile":              serving.CertFile,
		"tlsPrivateKeyFile":        serving.KeyFile,
		"authentication": map[string]any{
			"anonymous": map[string]any{"enabled": false},
			"webhook":   map[string]any{"enabled": false},
			"x509":      map[string]any{"clientCAFile": clientCA},
		},
		"authorization":               map[string]any{"mode": "AlwaysAllow"},
		"clusterDomain":               "cluster.local",
		"clusterDNS":                  []string{DNSIP},
		"podLogsDir":                  filepath.Join(dir, "kubelet", "pod-logs"),
		"volumePluginDir":             filepath.Join(dir, "kubelet", "volume-plugins"),
		"failSwapOn":                  false,
		"serializeImagePulls":         false,
		"imageGCHighThresholdPercent": 100,
		"imageGCLowThresholdPercent":  99,
		"evictionHard": map[string]string{
			"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%", "nodefs.inodesFree": "1%",
		},
		"maxPods":             maxPods,
		"syncFrequency":       "10s",
		"shutdownGracePeriod": "0s",
		"registerNode":        true,
		"rotateCertificates":  false,
		"serverTLSBootstrap":  false,
	}
}

// maxPods is how many pods the node admits: the addresses host-local hands
// out (PodCIDR up to podRangeEnd, 249 of them) less a few held by pods
// still being torn down.
const maxPods = 240

// kubeletPorts are the kubelet's server and healthz ports, kept in the
// cluster directory like the control plane's.
type kubeletPorts struct {
	Server       int `json:"server"`
	Healthz      int `json:"healthz"`
	ProxyHealthz int `json:"proxyHealthz"`
	ProxyMetrics int `json:"proxyMetrics"`
}

func loadOrPickKubeletPorts(path string) (kubeletPorts, error) {
	var p kubeletPorts
	if b, err := os.ReadFile(path); err == nil {
		return p, json.Unmarshal(b, &p)
	}
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for range 4 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return p, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	p = kubeletPorts{Server: ports[0], Healthz: ports[1], ProxyHealthz: ports[2], ProxyMetrics: ports[3]}
	b, _ := json.Marshal(p)
	return p, os.WriteFile(path, b, 0o644)
}

// writeKubeletFiles writes the kubelet's config, kubeconfig and serving
// certificate into dir/kubelet and returns the kubelet's arguments.
func writeKubeletFiles(dir, name string, api APIServer, localCA *pki.CA, socket string) ([]string, kubeletPorts, error) {
	kdir := filepath.Join(dir, "kubelet")
	for _, d := range []string{kdir, filepath.Join(kdir, "pod-logs"), filepath.Join(kdir, "volume-plugins")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, kubeletPorts{}, err
		}
	}
	ports, err := loadOrPickKubeletPorts(filepath.Join(kdir, "ports.json"))
	if err != nil {
		return nil, kubeletPorts{}, fmt.Errorf("kubelet ports: %w", err)
	}
	serving, err := localCA.Issue(kdir, "kubelet-serving", name, false, []net.IP{net.ParseIP(NodeIP)}, []string{name})
	if err != nil {
		return nil, kubeletPorts{}, err
	}
	b, err := json.MarshalIndent(kubeletConfig(dir, ports, serving, localCA.CertFile, socket), "", "  ")
	if err != nil {
		return nil, kubeletPorts{}, err
	}
	configFile := filepath.Join(kdir, "config.json")
	if err := os.WriteFile(configFile, b, 0o644); err != nil {
		return nil, kubeletPorts{}, err
	}
	// The kubelet uses the cluster's admin token: devcluster runs no Node
	// authorizer and no certificate signer for kubelet client certificates.
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["devcluster"] = &clientcmdapi.Cluster{Server: api.URL, CertificateAuthorityData: api.CA}
	cfg.AuthInfos["kubelet"] = &clientcmdapi.AuthInfo{Token: api.Token}
	cfg.Contexts["devcluster"] = &clientcmdapi.Context{Cluster: "devcluster", AuthInfo: "kubelet"}
	cfg.CurrentContext = "devcluster"
	kubeconfig := filepath.Join(kdir, "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, kubeconfig); err != nil {
		return nil, kubeletPorts{}, err
	}
	return []string{
		"--config=" + configFile,
		"--kubeconfig=" + kubeconfig,
		"--root-dir=" + filepath.Join(kdir, "root"),
		"--cert-dir=" + filepath.Join(kdir, "pki"),
		"--hostname-override=" + name,
		"--node-ip=" + NodeIP,
		// Its addresses past the first registration, and its ExternalIP,
		// come from devcluster as from a cloud provider (initializeNode).
		"--cloud-provider=external",
		"--v=" + strconv.Itoa(1),
	}, ports, nil
}
