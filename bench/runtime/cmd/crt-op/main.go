// Command crt-op is the benchmark's controller-runtime reconciler doing the
// same work as runtime-op: add one annotation to each Widget, with the same
// worker count (MaxConcurrentReconciles) and controller-runtime's defaults
// otherwise. It prints "ready" once its cache has synced.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func main() {
	kubeconfig := flag.String("kube", "", "kubeconfig of the cluster")
	namespace := flag.String("namespace", "", "namespace to watch")
	group := flag.String("group", "", "API group of the Widget CRD")
	workers := flag.Int("workers", 4, "MaxConcurrentReconciles")
	flag.Parse()
	if err := run(*kubeconfig, *namespace, *group, *workers); err != nil {
		fmt.Fprintln(os.Stderr, "crt-op:", err)
		os.Exit(1)
	}
}

const annotation = "bench.tailplane.io/handled"

func run(kubeconfig, namespace, group string, workers int) error {
	log.SetLogger(logr.Discard()) // quiet, like runtime-op
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = -1, 0 // the same unthrottled client on both sides
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{namespace: {}}},
	})
	if err != nil {
		return err
	}
	gvk := schema.GroupVersionKind{Group: group, Version: "v1", Kind: "Widget"}
	c := mgr.GetClient()
	reconciler := reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		obj := &unstructured.Unstructured{}
		obj.SetGroupVersionKind(gvk)
		if err := c.Get(ctx, req.NamespacedName, obj); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
		if _, done := obj.GetAnnotations()[annotation]; done {
			return reconcile.Result{}, nil
		}
		patch := []byte(`{"metadata":{"annotations":{"` + annotation + `":"1"}}}`)
		return reconcile.Result{}, c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch))
	})
	watched := &unstructured.Unstructured{}
	watched.SetGroupVersionKind(gvk)
	err = ctrl.NewControllerManagedBy(mgr).For(watched).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Complete(reconciler)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() {
		if mgr.GetCache().WaitForCacheSync(ctx) {
			fmt.Println("ready")
		}
	}()
	return mgr.Start(ctx)
}
