package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/charmbracelet/log"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/tailplane/tailplane/deploy/chart"
)

// ProxyClassName is the default ProxyClass devinstall creates.
const ProxyClassName = "devcluster"

// Install installs (or, when it is there already, upgrades) the Helm chart
// into the devcluster in dir, as `helm upgrade --install tailscale-operator
// deploy/chart/tailplane-operator -n tailscale --create-namespace --wait`
// with devcluster's OAuth client and login server would; then it applies the
// devcluster ProxyClass. The wait ends when the operator's Deployment is ready
// (devcluster runs a deployment controller).
//
// A non-empty podSecurity labels the namespace first with
// pod-security.kubernetes.io/enforce=<podSecurity> (go tool task dev:
// restricted), so that the API server refuses any operator or proxy pod that
// does not meet that Pod Security Standard.
//
// With workloadIdentity the operator authenticates as the tailnet's
// workload identity federation client (oauth.audience, no client secret).
func Install(ctx context.Context, dir, podSecurity string, workloadIdentity bool, logger *log.Logger) error {
	env, err := readEnv(filepath.Join(dir, "tailnet.env"))
	if err != nil {
		return err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "kubeconfig"))
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	// go tool task e2e:kind's image tags (values.yaml of the folder).
	extra, err := folderValues(dir)
	if err != nil {
		return err
	}
	values := chartValues(env)
	if workloadIdentity {
		if env["TS_API_FEDERATED_CLIENT_ID"] == "" {
			return fmt.Errorf("--workload-identity: %s names no workload identity client (TS_API_FEDERATED_CLIENT_ID; devcluster's own control server has one)", filepath.Join(dir, "tailnet.env"))
		}
		values["oauth"] = map[string]any{"clientId": env["TS_API_FEDERATED_CLIENT_ID"], "audience": env["TS_API_FEDERATED_AUDIENCE"]}
	}
	if podSecurity != "" {
		if err := labelNamespace(ctx, kube, chart.Namespace, map[string]string{
			"pod-security.kubernetes.io/enforce": podSecurity, "pod-security.kubernetes.io/warn": podSecurity,
		}); err != nil {
			return err
		}
	}
	helmLog := logger.WithPrefix("dev helm")
	helmLog.SetLevel(log.WarnLevel)
	logger.Info("installing the Helm chart; waiting for the operator", "chart", chart.Name, "release", chart.ReleaseName, "namespace", chart.Namespace)
	rel, err := chart.Install(ctx, cfg, chart.Namespace, chart.Options{
		Values: mergeValues(values, extra), Wait: true, Timeout: 3 * time.Minute, Log: helmLog,
		// A devcluster set up by an older devinstall holds the same objects,
		// applied without Helm: adopt them.
		TakeOwnership: true,
	})
	if err != nil {
		return fmt.Errorf("%w (see devcluster's logs in %s)", err, dir)
	}
	logger.Info("operator ready", "release", rel.Name, "revision", rel.Version, "status", rel.Info.Status)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kube.Discovery()))
	return apply(ctx, dyn, mapper, defaultProxyClass())
}

// chartValues are devinstall's chart values for the tailnet of tailnet.env:
// its OAuth client (or Headscale's API key) and login server, and its ACME
// server for every device of the release (proxyConfig.acmeDirectoryURL and
// acmeCAFile), the way a user points a release at a staging directory.
//
// The CA file is the ACME server's CA as a pod reads it: tailnet.env's
// TS_POD_ACME_CA_FILE, the service account's CA bundle, to which devcluster
// adds its local CA (the host's files are no pod's: the real node's
// containers see none, and the chart's emptyDir on /tmp hides a folder
// under /tmp from the process node's); older devclusters wrote only
// TS_ACME_CA_FILE. The operator trusts it too, which the real node's
// control server on port 443 needs. A plain-HTTP directory needs none.
func chartValues(env map[string]string) map[string]any {
	proxy := map[string]any{"defaultProxyClass": ProxyClassName}
	if dir := env["TS_DEBUG_ACME_DIRECTORY_URL"]; dir != "" {
		proxy["acmeDirectoryURL"] = dir
		if strings.HasPrefix(dir, "https:") {
			proxy["acmeCAFile"] = cmp.Or(env["TS_POD_ACME_CA_FILE"], env["TS_ACME_CA_FILE"])
		}
	}
	values := map[string]any{
		"oauth":          map[string]any{"clientId": env["TS_API_CLIENT_ID"], "clientSecret": env["TS_API_CLIENT_SECRET"]},
		"loginServer":    env["TS_CONTROL_URL"],
		"operatorConfig": map[string]any{"logging": "dev"},
		"proxyConfig":    proxy,
	}
	if env["TS_CONTROL"] == "headscale" {
		// devcluster up --control headscale: Headscale's API key instead
		// of an OAuth client; proxies log in to Headscale.
		delete(values, "oauth")
		values["loginServer"] = ""
		values["headscale"] = map[string]any{"url": env["HEADSCALE_URL"], "apiKey": env["HEADSCALE_API_KEY"]}
	}
	return values
}

// defaultProxyClass is the default ProxyClass (proxyConfig.defaultProxyClass),
// empty: the ACME settings are the release's, so it sets no TS_ env and
// earns no CustomTSEnvVar Warning. It stays for users' manifests that name
// it, and as the place to try ProxyClass settings. Applied over one of an
// older devinstall, it drops the env that one set (same field manager).
func defaultProxyClass() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "tailscale.com/v1alpha1", "kind": "ProxyClass",
		"metadata": map[string]any{"name": ProxyClassName},
		"spec":     map[string]any{},
	}}
}

// labelNamespace creates namespace ns with labels, or adds them to it.
func labelNamespace(ctx context.Context, kube kubernetes.Interface, ns string, labels map[string]string) error {
	_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		if err != nil {
			return fmt.Errorf("namespace %s: %w", ns, err)
		}
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
	if err != nil {
		return err
	}
	if _, err := kube.CoreV1().Namespaces().Patch(ctx, ns, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("label namespace %s: %w", ns, err)
	}
	return nil
}

func apply(ctx context.Context, dyn dynamic.Interface, mapper meta.RESTMapper, o *unstructured.Unstructured) error {
	gvk := o.GroupVersionKind()
	var mapping *meta.RESTMapping
	var err error
	for range 50 { // a CRD's kind is served a moment after it is created
		if mapping, err = mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err == nil {
			break
		}
		if rm, ok := mapper.(interface{ Reset() }); ok {
			rm.Reset()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-waitTick():
		}
	}
	if err != nil {
		return fmt.Errorf("%s: %w", gvk, err)
	}
	ri := dynamic.ResourceInterface(dyn.Resource(mapping.Resource))
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		ri = dyn.Resource(mapping.Resource).Namespace(o.GetNamespace())
	}
	if _, err := ri.Apply(ctx, o.GetName(), o, metav1.ApplyOptions{FieldManager: "devinstall", Force: true}); err != nil {
		return fmt.Errorf("apply %s %s: %w", gvk.Kind, o.GetName(), err)
	}
	return nil
}

func readEnv(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("devcluster tailnet settings: %w (is devcluster up?)", err)
	}
	defer f.Close()
	env := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			env[k] = v
		}
	}
	return env, sc.Err()
}
