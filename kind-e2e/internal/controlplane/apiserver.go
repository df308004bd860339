package controlplane

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/tailplane/tailplane/kind-e2e/internal/freeport"
	"github.com/tailplane/tailplane/kind-e2e/internal/pki"
)

// ServiceCIDR is the Service ClusterIP range. Loopback addresses can be bound
// by any process on Linux, which is what lets a process node give Services
// working ClusterIPs without touching an interface.
const ServiceCIDR = "127.96.0.0/16"

// Ports are the loopback ports of one cluster. They are kept in the cluster
// directory so that a resumed cluster keeps its addresses and kubeconfig.
type Ports struct {
	EtcdClient int `json:"etcdClient"`
	EtcdPeer   int `json:"etcdPeer"`
	APIServer  int `json:"apiServer"`
}

// Cluster is a running etcd + kube-apiserver.
type Cluster struct {
	Dir        string
	Ports      Ports
	Kubeconfig string
	// URL is the apiserver's address in Kubeconfig.
	URL   string
	Token string
	CA    []byte

	// LocalCA signs the certificates between devcluster's own parts (the
	// apiserver's client certificate for the node's log endpoint, and the
	// node's serving certificate).
	LocalCA *pki.CA
	// ServiceAccountKey is the PEM file service-account tokens are signed with.
	ServiceAccountKey string

	// ServiceCIDR is the Service ClusterIP range in use.
	ServiceCIDR string
	opts        Options

	etcd      *Etcd
	apiserver *exec.Cmd
	exited    chan error
	kcm       *child
}

// ServiceAccountIssuer is the iss of the cluster's ServiceAccount tokens,
// as its OIDC discovery document (/.well-known/openid-configuration) says.
const ServiceAccountIssuer = "https://kubernetes.default.svc.cluster.local"

// Layout of a cluster directory.
func pkiDir(dir string) string  { return filepath.Join(dir, "pki") }
func logsDir(dir string) string { return filepath.Join(dir, "logs") }

// Options say where the control plane is reachable. The zero value is the
// process node's: everything on loopback, Services in ServiceCIDR.
type Options struct {
	// ServiceCIDR is the Service ClusterIP range; ServiceCIDR when empty.
	ServiceCIDR string
	// AdvertiseAddress, when set, is a non-loopback address of this machine
	// that the apiserver also listens on (it binds every address) and
	// publishes as the kubernetes Service's endpoint: pods in their own
	// network namespaces (the real node's) reach it there.
	AdvertiseAddress string
	// PodTrustsLocalCA adds LocalCA to the root CA bundle every pod gets
	// (ca.crt of its service-account volume, ConfigMap kube-root-ca.crt)
	// after the apiserver's own CA: how pods trust what LocalCA signs, the
	// tailnet's ACME server (SSL_CERT_FILE=PodCAFile). devcluster up sets
	// it on both nodes: the real node's containers read no host file, and
	// a process node's pod may mount over the folder of one.
	PodTrustsLocalCA bool
	// AuditPolicy, when set, is an audit policy file (audit.k8s.io/v1
	// Policy): the apiserver then writes its audit log as JSON lines to
	// AuditLog(dir), in batches (at most a second old) so that the log
	// costs the requests little.
	AuditPolicy string
}

// AuditLog is where the apiserver of dir writes its audit log when
// Options.AuditPolicy is set.
func AuditLog(dir string) string { return filepath.Join(logsDir(dir), "audit.log") }

// PodCAFile is where a pod reads its service account's CA bundle.
const PodCAFile = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"

// Start brings up etcd and kube-apiserver for dir and returns once /readyz
// answers ok. self is the devcluster binary, re-executed as the apiserver.
func Start(ctx context.Context, dir, self string) (*Cluster, error) {
	return StartWith(ctx, dir, self, Options{})
}

// StartWith is Start with Options.
func StartWith(ctx context.Context, dir, self string, opts Options) (*Cluster, error) {
	if opts.ServiceCIDR == "" {
		opts.ServiceCIDR = ServiceCIDR
	}
	for _, d := range []string{dir, pkiDir(dir), logsDir(dir)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	ports, err := loadOrPickPorts(filepath.Join(dir, "ports.json"))
	if err != nil {
		return nil, err
	}
	token, err := ensureAdminToken(filepath.Join(pkiDir(dir), "tokens.csv"))
	if err != nil {
		return nil, err
	}
	saKey := filepath.Join(pkiDir(dir), "sa.key")
	if err := ensureServiceAccountKey(saKey); err != nil {
		return nil, err
	}
	localCA, err := pki.LoadOrCreateCA(pkiDir(dir), "local-ca")
	if err != nil {
		return nil, err
	}
	etcd, err := StartEtcd(ctx, dir, ports.EtcdClient, ports.EtcdPeer)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Dir: dir, Ports: ports, Token: token, etcd: etcd, exited: make(chan error, 1),
		LocalCA: localCA, ServiceAccountKey: saKey, ServiceCIDR: opts.ServiceCIDR, opts: opts}
	if err := c.startAPIServer(self, saKey); err != nil {
		etcd.Close()
		return nil, err
	}
	if err := c.waitReady(ctx); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) startAPIServer(self, saKey string) error {
	kubeletClient, err := c.LocalCA.Issue(pkiDir(c.Dir), "apiserver-kubelet-client", "kube-apiserver-kubelet-client", true, nil, nil)
	if err != nil {
		return err
	}
	bind, advertise := "127.0.0.1", "127.0.0.1"
	if c.opts.AdvertiseAddress != "" {
		bind, advertise = "0.0.0.0", c.opts.AdvertiseAddress
	}
	args := []string{"component", "kube-apiserver",
		"--etcd-servers=" + c.etcd.ClientURL,
		"--bind-address=" + bind,
		"--advertise-address=" + advertise,
		"--secure-port=" + strconv.Itoa(c.Ports.APIServer),
		"--cert-dir=" + filepath.Join(pkiDir(c.Dir), "apiserver"),
		"--token-auth-file=" + filepath.Join(pkiDir(c.Dir), "tokens.csv"),
		"--authorization-mode=RBAC",
		"--service-cluster-ip-range=" + c.ServiceCIDR,
		"--service-account-issuer=" + ServiceAccountIssuer,
		"--service-account-key-file=" + saKey,
		"--service-account-signing-key-file=" + saKey,
		"--allow-privileged=true",
		"--profiling=false",
		// kubectl logs: the apiserver calls the node's log endpoint with this
		// client certificate and checks the node's serving certificate.
		"--kubelet-client-certificate=" + kubeletClient.CertFile,
		"--kubelet-client-key=" + kubeletClient.KeyFile,
		"--kubelet-certificate-authority=" + c.LocalCA.CertFile,
		"--kubelet-preferred-address-types=InternalIP",
	}
	if c.opts.AuditPolicy != "" {
		args = append(args, "--audit-policy-file="+c.opts.AuditPolicy, "--audit-log-path="+AuditLog(c.Dir),
			"--audit-log-format=json", "--audit-log-mode=batch", "--audit-log-batch-max-wait=1s")
	}
	if c.opts.AdvertiseAddress == "" {
		// Endpoints may not hold loopback addresses, so the apiserver cannot
		// publish itself; in-cluster clients get its address from the node.
		args = append(args, "--endpoint-reconciler-type=none")
	}
	logFile, err := os.OpenFile(filepath.Join(logsDir(c.Dir), "kube-apiserver.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(self, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// The apiserver must not outlive devcluster, however devcluster ends.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("start kube-apiserver: %w", err)
	}
	c.apiserver = cmd
	go func() { c.exited <- cmd.Wait(); logFile.Close() }()
	return nil
}

func (c *Cluster) waitReady(ctx context.Context) error {
	certFile := filepath.Join(pkiDir(c.Dir), "apiserver", "apiserver.crt")
	// The apiserver's self-signed certificate names its advertise address
	// (and, bound to every address, only "localhost" besides).
	addr := "127.0.0.1"
	if c.opts.AdvertiseAddress != "" {
		addr = c.opts.AdvertiseAddress
	}
	host := fmt.Sprintf("https://%s", net.JoinHostPort(addr, strconv.Itoa(c.Ports.APIServer)))
	deadline := time.Now().Add(2 * time.Minute)
	var last error
	for time.Now().Before(deadline) {
		select {
		case err := <-c.exited:
			return fmt.Errorf("kube-apiserver exited while starting (%v); see %s", err, filepath.Join(logsDir(c.Dir), "kube-apiserver.log"))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if c.CA == nil {
			ca, err := servingCA(certFile)
			if err != nil {
				last = err
				continue
			}
			c.CA = ca
		}
		if last = c.probe(ctx, host+"/readyz"); last == nil {
			return c.writeKubeconfig(host)
		}
	}
	return fmt.Errorf("kube-apiserver not ready after 2m: %v", last)
}

func (c *Cluster) probe(ctx context.Context, url string) error {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(c.CA)
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+c.Token)
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return nil
}

func (c *Cluster) writeKubeconfig(host string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["devcluster"] = &clientcmdapi.Cluster{Server: host, CertificateAuthorityData: c.CA}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: c.Token}
	cfg.Contexts["devcluster"] = &clientcmdapi.Context{Cluster: "devcluster", AuthInfo: "admin", Namespace: "default"}
	cfg.CurrentContext = "devcluster"
	c.Kubeconfig = filepath.Join(c.Dir, "kubeconfig")
	c.URL = host
	return clientcmd.WriteToFile(*cfg, c.Kubeconfig)
}

// Done is closed-over by callers that want to notice the apiserver dying.
func (c *Cluster) Done() <-chan error { return c.exited }

// Stop ends kube-controller-manager and kube-apiserver (SIGTERM, then SIGKILL
// after 10s) and etcd.
func (c *Cluster) Stop() {
	if c.kcm != nil {
		c.kcm.stop(10 * time.Second)
	}
	if c.apiserver != nil && c.apiserver.Process != nil {
		_ = syscall.Kill(-c.apiserver.Process.Pid, syscall.SIGTERM)
		select {
		case <-c.exited:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-c.apiserver.Process.Pid, syscall.SIGKILL)
			<-c.exited
		}
	}
	if c.etcd != nil {
		c.etcd.Close()
	}
}

func loadOrPickPorts(path string) (Ports, error) {
	var p Ports
	if b, err := os.ReadFile(path); err == nil {
		if err := json.Unmarshal(b, &p); err != nil {
			return p, fmt.Errorf("read %s: %w", path, err)
		}
		return p, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return p, err
	}
	free, err := freeport.On("127.0.0.1", 3)
	if err != nil {
		return p, err
	}
	p = Ports{EtcdClient: free[0], EtcdPeer: free[1], APIServer: free[2]}
	b, _ := json.MarshalIndent(p, "", "  ")
	return p, os.WriteFile(path, b, 0o644)
}
