package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/charmbracelet/log"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/tailplane/tailplane/deploy/manifests"
)

// ProxyClassName is the default ProxyClass devinstall creates.
const ProxyClassName = "devcluster"

// Install applies the manifests into the devcluster in dir, adjusted for its
// tailnet, plus the devcluster ProxyClass, and waits for the operator.
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
	objs, err := manifests.Objects()
	if err != nil {
		return err
	}
	for _, o := range objs {
		switch o.GetKind() {
		case "Secret":
			if o.GetName() == "operator-oauth" {
				_ = unstructured.SetNestedStringMap(o.Object, map[string]string{
					"client_id": env["TS_API_CLIENT_ID"], "client_secret": env["TS_API_CLIENT_SECRET"]}, "stringData")
			}
		case "Deployment":
			if err := setEnv(o, map[string]string{
				"OPERATOR_LOGIN_SERVER": env["TS_CONTROL_URL"], "PROXY_DEFAULT_CLASS": ProxyClassName, "OPERATOR_LOGGING": "dev",
			}); err != nil {
				return err
			}
		}
	}
	// The default ProxyClass: proxies request certificates from devcluster's
	// ACME server (Pebble) and trust its CA, as a user would point them at a
	// staging directory. TS_ env vars draw a CustomTSEnvVar Warning: expected.
	objs = append(objs, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "tailscale.com/v1alpha1", "kind": "ProxyClass",
		"metadata": map[string]any{"name": ProxyClassName},
		"spec": map[string]any{"statefulSet": map[string]any{"pod": map[string]any{"tailscaleContainer": map[string]any{
			"env": []any{
				map[string]any{"name": "TS_DEBUG_ACME_DIRECTORY_URL", "value": env["TS_DEBUG_ACME_DIRECTORY_URL"]},
				map[string]any{"name": "SSL_CERT_FILE", "value": env["TS_ACME_CA_FILE"]},
			},
		}}}},
	}})
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kube.Discovery()))
	for _, o := range objs {
		if err := apply(ctx, dyn, mapper, o); err != nil {
			return err
		}
		if o.GetKind() == "CustomResourceDefinition" {
			mapper.Reset()
		}
	}
	logger.Info("manifests applied; waiting for the operator")
	for {
		d, err := kube.AppsV1().Deployments("tailscale").Get(ctx, "operator", metav1.GetOptions{})
		if err == nil && d.Status.ReadyReplicas > 0 {
			logger.Info("operator ready")
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("operator not ready: %w (see devcluster's logs in %s)", ctx.Err(), dir)
		case <-waitTick():
		}
	}
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

// setEnv sets env vars of the Deployment's first container.
func setEnv(dep *unstructured.Unstructured, vars map[string]string) error {
	containers, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
	if len(containers) == 0 {
		return fmt.Errorf("deployment %s has no container", dep.GetName())
	}
	c := containers[0].(map[string]any)
	env, _ := c["env"].([]any)
	for name, value := range vars {
		found := false
		for _, e := range env {
			if m := e.(map[string]any); m["name"] == name {
				m["value"], found = value, true
			}
		}
		if !found {
			env = append(env, map[string]any{"name": name, "value": value})
		}
	}
	c["env"] = env
	return unstructured.SetNestedSlice(dep.Object, containers, "spec", "template", "spec", "containers")
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
