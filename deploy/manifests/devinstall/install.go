package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/charmbracelet/log"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
func Install(ctx context.Context, dir string, logger *log.Logger) error {
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
	values := map[string]any{
		"oauth":          map[string]any{"clientId": env["TS_API_CLIENT_ID"], "clientSecret": env["TS_API_CLIENT_SECRET"]},
		"loginServer":    env["TS_CONTROL_URL"],
		"operatorConfig": map[string]any{"logging": "dev"},
		"proxyConfig":    map[string]any{"defaultProxyClass": ProxyClassName},
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

	// The default ProxyClass: proxies request certificates from devcluster's
	// ACME server (Pebble) and trust its CA, as a user would point them at a
	// staging directory. TS_ env vars draw a CustomTSEnvVar Warning: expected.
	proxyEnv := []any{map[string]any{"name": "TS_DEBUG_ACME_DIRECTORY_URL", "value": env["TS_DEBUG_ACME_DIRECTORY_URL"]}}
	if strings.HasPrefix(env["TS_DEBUG_ACME_DIRECTORY_URL"], "https:") {
		proxyEnv = append(proxyEnv, map[string]any{"name": "SSL_CERT_FILE", "value": env["TS_ACME_CA_FILE"]})
	}
	proxyClass := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "tailscale.com/v1alpha1", "kind": "ProxyClass",
		"metadata": map[string]any{"name": ProxyClassName},
		"spec": map[string]any{"statefulSet": map[string]any{"pod": map[string]any{"tailscaleContainer": map[string]any{
			"env": proxyEnv,
		}}}},
	}}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kube.Discovery()))
	return apply(ctx, dyn, mapper, proxyClass)
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
