package official

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
)

// Cluster is the devcluster both operators run on.
type Cluster struct {
	Kube kubernetes.Interface
	// Config is the admin client configuration the clients use.
	Config *rest.Config
	Dyn    dynamic.Interface
	mapper meta.ResettableRESTMapper
}

// NewCluster connects to the cluster of kubeconfig.
func NewCluster(kubeconfig string) (*Cluster, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = 100, 200
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kube.Discovery()))
	return &Cluster{Kube: kube, Dyn: dyn, mapper: mapper, Config: cfg}, nil
}

// ReadManifests reads the YAML documents of a file as objects.
func ReadManifests(path string) ([]*unstructured.Unstructured, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(m) != 0 {
			out = append(out, &unstructured.Unstructured{Object: m})
		}
	}
}

func (c *Cluster) resource(o *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	gvk := o.GroupVersionKind()
	mapping, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		c.mapper.Reset() // a CRD installed since the last discovery
		if mapping, err = c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
			return nil, fmt.Errorf("%s: %w", gvk, err)
		}
	}
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		return c.Dyn.Resource(mapping.Resource).Namespace(o.GetNamespace()), nil
	}
	return c.Dyn.Resource(mapping.Resource), nil
}

// Apply server-side applies o (field manager bench-official) and returns
// the object as stored.
func (c *Cluster) Apply(ctx context.Context, o *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	ri, err := c.resource(o)
	if err != nil {
		return nil, err
	}
	got, err := ri.Apply(ctx, o.GetName(), o, metav1.ApplyOptions{FieldManager: "bench-official", Force: true})
	if err != nil {
		return nil, fmt.Errorf("apply %s %s/%s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err)
	}
	return got, nil
}

// Get reads o back.
func (c *Cluster) Get(ctx context.Context, o *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	ri, err := c.resource(o)
	if err != nil {
		return nil, err
	}
	return ri.Get(ctx, o.GetName(), metav1.GetOptions{})
}

// Delete deletes o and, with a timeout, waits until it is gone (its
// finalizers ran); absent is fine.
func (c *Cluster) Delete(ctx context.Context, o *unstructured.Unstructured, timeout time.Duration) error {
	ri, err := c.resource(o)
	if err != nil {
		return err
	}
	if err := ri.Delete(ctx, o.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete %s %s: %w", o.GetKind(), o.GetName(), err)
	}
	if timeout == 0 {
		return nil
	}
	return Poll(ctx, timeout, 200*time.Millisecond, func() (bool, error) {
		_, err := ri.Get(ctx, o.GetName(), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	}, fmt.Sprintf("%s %s/%s to be deleted", o.GetKind(), o.GetNamespace(), o.GetName()))
}

// Poll calls check every interval until it says done, it fails, or timeout
// passes; what names the wait in the timeout's error.
func Poll(ctx context.Context, timeout, interval time.Duration, check func() (bool, error), what string) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var lastErr error
	for {
		done, err := check()
		if done {
			return nil
		}
		lastErr = err
		select {
		case <-ctx.Done():
			if lastErr != nil {
				return fmt.Errorf("waiting for %s: %w (last error: %v)", what, ctx.Err(), lastErr)
			}
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-tick.C:
		}
	}
}

// ScaleOperator sets the replicas of Deployment "operator" in ns (both
// charts name it so) and waits until that many of its pods run, and no
// other is left terminating: a terminating operator still runs until its
// grace period ends, and would handle (and post Events about) objects made
// for the other operator meanwhile.
func (c *Cluster) ScaleOperator(ctx context.Context, ns string, replicas int32) error {
	scale, err := c.Kube.AppsV1().Deployments(ns).GetScale(ctx, "operator", metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("scale of %s/operator: %w", ns, err)
	}
	scale.Spec.Replicas = replicas
	if _, err := c.Kube.AppsV1().Deployments(ns).UpdateScale(ctx, "operator", scale, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("scale %s/operator to %d: %w", ns, replicas, err)
	}
	return Poll(ctx, 3*time.Minute, 500*time.Millisecond, func() (bool, error) {
		running, err := c.OperatorPods(ctx, ns)
		if err != nil {
			return false, err
		}
		all, err := c.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		present := 0
		for _, p := range all.Items {
			if strings.HasPrefix(p.Name, "operator-") {
				present++
			}
		}
		return len(running) == int(replicas) && present == int(replicas), nil
	}, fmt.Sprintf("%d running operator pods in %s, none terminating", replicas, ns))
}

// OperatorPods are the running, not deleted pods of Deployment "operator".
func (c *Cluster) OperatorPods(ctx context.Context, ns string) ([]string, error) {
	pods, err := c.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var uids []string
	for _, p := range pods.Items {
		if strings.HasPrefix(p.Name, "operator-") && p.DeletionTimestamp == nil && p.Status.Phase == "Running" {
			uids = append(uids, string(p.UID))
		}
	}
	return uids, nil
}

// ProxyPods are the UIDs of the running proxy pods an operator in
// operatorNS made for the parent ns/name.
func (c *Cluster) ProxyPods(ctx context.Context, operatorNS, ns, name string) ([]string, error) {
	pods, err := c.Kube.CoreV1().Pods(operatorNS).List(ctx, metav1.ListOptions{LabelSelector: parentSelector(ns, name)})
	if err != nil {
		return nil, err
	}
	var uids []string
	for _, p := range pods.Items {
		if p.Status.Phase == "Running" && p.DeletionTimestamp == nil {
			uids = append(uids, string(p.UID))
		}
	}
	return uids, nil
}

// parentSelector selects the objects both operators label with their
// parent (the official operator's label names, which Tailplane keeps); a
// cluster-scoped parent (ns "", a ProxyGroup) has no namespace label.
func parentSelector(ns, name string) string {
	if ns == "" {
		return "tailscale.com/parent-resource=" + name
	}
	return "tailscale.com/parent-resource=" + name + ",tailscale.com/parent-resource-ns=" + ns
}

// childKinds are the kinds of object an operator makes for a parent,
// StatefulSets first (DeleteChildren stops the proxy before its Secrets go).
func childKinds() []schema.GroupVersionResource {
	return []schema.GroupVersionResource{
		{Group: "apps", Version: "v1", Resource: "statefulsets"},
		{Version: "v1", Resource: "secrets"}, {Version: "v1", Resource: "services"}, {Version: "v1", Resource: "configmaps"},
		{Version: "v1", Resource: "serviceaccounts"},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"},
	}
}

// DeleteChildren deletes the objects an operator in operatorNS made for the
// parent ns/name.
func (c *Cluster) DeleteChildren(ctx context.Context, operatorNS, ns, name string) error {
	for _, gvr := range childKinds() {
		err := c.Dyn.Resource(gvr).Namespace(operatorNS).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: parentSelector(ns, name)})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete %s of %s/%s: %w", gvr.Resource, ns, name, err)
		}
	}
	return nil
}
