package realnode

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

const (
	// Bridge is the Linux bridge the pods' veths join (the CNI bridge
	// plugin's "bridge"); its address is NodeIP.
	Bridge = "dcbr0"
	// PodCIDR is where the pods' addresses come from. 198.18.0.0/15 is
	// reserved for benchmarking, so it collides with no real network; the
	// process node uses 198.18.0.0/16 and the real node the next /16.
	PodCIDR = "198.19.0.0/24"
	// NodeIP is the bridge's address: the node's InternalIP, where the
	// kube-apiserver reaches the kubelet and pods reach the host. The
	// kubelet refuses a loopback node address, so it cannot be 127.0.0.1.
	NodeIP = "198.19.0.1"
	// podRangeEnd is the last address host-local hands to a pod.
	podRangeEnd = "198.19.0.250"
	// ExternalIP is the node's ExternalIP address, as a cloud provider
	// gives its nodes one (initializeNode): a second address of the
	// bridge, outside the pod range, where NodePort Services answer
	// (ProxyClass staticEndpoints advertise it to the tailnet).
	ExternalIP = "198.19.1.1"
)

// PrepareNetwork creates the bridge with NodeIP, before the kube-apiserver
// (it advertises NodeIP) and the kubelet (it checks that its node IP is on an
// interface) start; the CNI bridge plugin then finds it and only attaches
// veths. It also makes sure that the host routes between pods (ip_forward)
// and that traffic bridged between two pods passes iptables
// (bridge-nf-call-iptables), which kube-proxy's Service rules need, as kind's
// node image does.
func PrepareNetwork() error {
	for _, sysctl := range []string{"net/ipv4/ip_forward", "net/bridge/bridge-nf-call-iptables"} {
		p := filepath.Join("/proc/sys", sysctl)
		if b, err := os.ReadFile(p); err == nil && strings.TrimSpace(string(b)) == "1" {
			continue
		}
		if err := os.WriteFile(p, []byte("1"), 0o644); err != nil {
			return fmt.Errorf("sysctl %s=1: %w", strings.ReplaceAll(sysctl, "/", "."), err)
		}
	}
	return ensureBridge()
}

func ensureBridge() error {
	if err := ipCmd("link", "add", Bridge, "type", "bridge"); err != nil && !strings.Contains(err.Error(), "File exists") {
		return err
	}
	if err := ipCmd("addr", "add", NodeIP+"/24", "dev", Bridge); err != nil &&
		!strings.Contains(err.Error(), "File exists") && !strings.Contains(err.Error(), "already assigned") {
		return err
	}
	if err := ipCmd("addr", "add", ExternalIP+"/32", "dev", Bridge); err != nil &&
		!strings.Contains(err.Error(), "File exists") && !strings.Contains(err.Error(), "already assigned") {
		return err
	}
	if err := ipCmd("link", "set", Bridge, "up"); err != nil {
		return err
	}
	// The host is the node: it reaches ClusterIPs through kube-proxy's
	// OUTPUT rules, as a kind node does. Without this route a connection
	// begun before kube-proxy has a Service's rules would leave through the
	// default route; with it, it stays on the bridge. Removed with the
	// bridge.
	if err := ipCmd("route", "replace", ServiceCIDR, "dev", Bridge, "src", NodeIP); err != nil {
		return err
	}
	return nil
}

// removeBridge deletes the bridge (and with it the pods' route).
func removeBridge() error {
	err := ipCmd("link", "del", Bridge)
	if err != nil && strings.Contains(err.Error(), "Cannot find device") {
		return nil
	}
	return err
}

func ipCmd(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// writeCNIConfig writes the pod network: the bridge plugin with host-local
// addresses from PodCIDR (its state under the cluster directory) and
// portmap for hostPort. containerd adds the loopback plugin itself.
func writeCNIConfig(confDir, ipamDir string) error {
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "devcluster",
		"plugins": []any{
			map[string]any{
				"type": "bridge", "bridge": Bridge, "isGateway": true, "hairpinMode": true,
				"ipam": map[string]any{
					"type":    "host-local",
					"dataDir": ipamDir,
					"ranges":  [][]map[string]string{{{"subnet": PodCIDR, "gateway": NodeIP, "rangeEnd": podRangeEnd}}},
					"routes":  []map[string]string{{"dst": "0.0.0.0/0"}},
				},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}
	b, err := json.MarshalIndent(conf, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(confDir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(confDir, "10-devcluster.conflist"), b, 0o644)
}
