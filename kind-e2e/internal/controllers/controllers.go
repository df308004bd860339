// Package controllers runs the Kubernetes controllers devcluster needs
// (Deployments, ReplicaSets, StatefulSets, Jobs, EndpointSlices, garbage
// collection, namespace deletion, ServiceAccounts and their legacy token
// Secrets, the kube-root-ca.crt ConfigMaps), each built from its own package
// of k8s.io/kubernetes/pkg/controller and wired as kube-controller-manager
// wires it.
//
// It replaces cmd/kube-controller-manager/app, which links every controller
// of Kubernetes (cloud, volume, node lifecycle, the kubelet's resource
// managers, ...) whatever --controllers says: about 550 packages that
// devcluster never runs, a fifth of its cold build (docs/development.md).
// The controllers are the same code; what is left out is the generic
// manager around them (leader election, its HTTP endpoints, the flags).
//
// It imports client-go, k8s.io/controller-manager and the controller
// packages of k8s.io/kubernetes.
package controllers

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	cacheddiscovery "k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
	"k8s.io/controller-manager/pkg/informerfactory"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/controller/certificates/rootcacertpublisher"
	"k8s.io/kubernetes/pkg/controller/deployment"
	"k8s.io/kubernetes/pkg/controller/endpointslice"
	"k8s.io/kubernetes/pkg/controller/garbagecollector"
	"k8s.io/kubernetes/pkg/controller/job"
	"k8s.io/kubernetes/pkg/controller/namespace"
	"k8s.io/kubernetes/pkg/controller/replicaset"
	"k8s.io/kubernetes/pkg/controller/serviceaccount"
	"k8s.io/kubernetes/pkg/controller/statefulset"
	satoken "k8s.io/kubernetes/pkg/serviceaccount"
)

// Config says where the controllers find the cluster and their keys.
type Config struct {
	// Kubeconfig is an admin kubeconfig of the cluster.
	Kubeconfig string
	// ServiceAccountKeyFile signs the legacy token Secrets of ServiceAccounts
	// (the apiserver's --service-account-key-file must verify them).
	ServiceAccountKeyFile string
	// RootCAFile is the CA bundle published to every namespace as ConfigMap
	// kube-root-ca.crt and put into token Secrets.
	RootCAFile string
}

// Settings of kube-controller-manager v1.37 that devcluster keeps, except
// for Deployments and ReplicaSets, which devcluster always ran with 2
// workers (--concurrent-deployment-syncs, --concurrent-replicaset-syncs).
const (
	clientQPS, clientBurst = 20, 30
	minResync              = 12 * time.Hour
	gcSyncPeriod           = 30 * time.Second
	namespaceResync        = 5 * time.Minute
	maxEndpointsPerSlice   = 100
)

// Run starts the controllers and returns when ctx ends, or with an error
// when one of them cannot be built.
func Run(ctx context.Context, cfg Config) error {
	base, err := clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	rootCA, err := readCA(cfg.RootCAFile)
	if err != nil {
		return fmt.Errorf("root CA file %s: %w", cfg.RootCAFile, err)
	}
	key, err := keyutil.PrivateKeyFromFile(cfg.ServiceAccountKeyFile)
	if err != nil {
		return fmt.Errorf("service account key %s: %w", cfg.ServiceAccountKeyFile, err)
	}
	b := builder{base: base}
	shared := b.client("shared-informers")
	resync := time.Duration(float64(minResync) * (1 + rand.Float64()))
	factory := informers.NewSharedInformerFactoryWithOptions(shared, resync, informers.WithTransform(dropManagedFields))
	metaClient := b.metadata("metadata-informers", 1)
	metaFactory := metadatainformer.NewSharedInformerFactoryWithOptions(metaClient, resync, metadatainformer.WithTransform(dropManagedFields))
	objectOrMetadata := informerfactory.NewInformerFactory(factory, metaFactory)
	informersStarted := make(chan struct{})

	disco, err := discovery.NewDiscoveryClientForConfig(b.config("controller-discovery", 1))
	if err != nil {
		return err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(cacheddiscovery.NewMemCacheClient(disco))

	var loops []func(context.Context)
	add := func(run func(context.Context)) { loops = append(loops, run) }

	core, apps := factory.Core().V1(), factory.Apps().V1()
	dc, err := deployment.NewDeploymentController(ctx, apps.Deployments(), apps.ReplicaSets(), core.Pods(), b.client("deployment-controller"))
	if err != nil {
		return fmt.Errorf("deployment controller: %w", err)
	}
	add(func(ctx context.Context) { dc.Run(ctx, 2) })
	rsc := replicaset.NewReplicaSetController(ctx, apps.ReplicaSets(), core.Pods(), b.client("replicaset-controller"), replicaset.BurstReplicas)
	add(func(ctx context.Context) { rsc.Run(ctx, 2) })
	ssc := statefulset.NewStatefulSetController(ctx, core.Pods(), apps.StatefulSets(), core.PersistentVolumeClaims(),
		apps.ControllerRevisions(), b.client("statefulset-controller"))
	add(func(ctx context.Context) { ssc.Run(ctx, 5) })
	// The Workload and PodGroup informers only serve the WorkloadWithJob
	// feature, off by default.
	jc, err := job.NewController(ctx, b.client("job-controller"), core.Pods(), factory.Batch().V1().Jobs(), nil, nil)
	if err != nil {
		return fmt.Errorf("job controller: %w", err)
	}
	add(func(ctx context.Context) { jc.Run(ctx, 5) })
	esc := endpointslice.NewController(ctx, core.Pods(), core.Services(), core.Nodes(), factory.Discovery().V1().EndpointSlices(),
		maxEndpointsPerSlice, b.client("endpointslice-controller"), 0)
	add(func(ctx context.Context) { esc.Run(ctx, 5) })

	// Namespace deletion makes many discovery and delete calls: it gets
	// the higher limits kube-controller-manager gives it.
	nsConfig := b.config("namespace-controller", 1)
	nsConfig.QPS, nsConfig.Burst = nsConfig.QPS*20, nsConfig.Burst*100
	nsClient, err := kubernetes.NewForConfig(nsConfig)
	if err != nil {
		return err
	}
	nsMeta, err := metadata.NewForConfig(nsConfig)
	if err != nil {
		return err
	}
	nc := namespace.NewNamespaceController(ctx, nsClient, nsMeta, nsClient.Discovery().ServerPreferredNamespacedResources,
		core.Namespaces(), namespaceResync, corev1.FinalizerKubernetes)
	add(func(ctx context.Context) { nc.Run(ctx, 10) })

	sac, err := serviceaccount.NewServiceAccountsController(klog.FromContext(ctx), core.ServiceAccounts(), core.Namespaces(),
		b.client("service-account-controller"), serviceaccount.DefaultServiceAccountsControllerOptions())
	if err != nil {
		return fmt.Errorf("service account controller: %w", err)
	}
	add(func(ctx context.Context) { sac.Run(ctx, 1) })
	tokens, err := satoken.JWTTokenGenerator(satoken.LegacyIssuer, key)
	if err != nil {
		return fmt.Errorf("token generator: %w", err)
	}
	tc, err := serviceaccount.NewTokensController(klog.FromContext(ctx), core.ServiceAccounts(), core.Secrets(),
		b.client("tokens-controller"), serviceaccount.TokensControllerOptions{TokenGenerator: tokens, RootCA: rootCA})
	if err != nil {
		return fmt.Errorf("tokens controller: %w", err)
	}
	add(func(ctx context.Context) { tc.Run(ctx, 5) })
	pub, err := rootcacertpublisher.NewPublisher(core.ConfigMaps(), core.Namespaces(), b.client("root-ca-cert-publisher"), rootCA)
	if err != nil {
		return fmt.Errorf("root CA publisher: %w", err)
	}
	add(func(ctx context.Context) { pub.Run(ctx, 1) })

	// Garbage collection: each deletion takes two calls, hence twice the
	// rate (as kube-controller-manager does).
	gcMeta := b.metadata("generic-garbage-collector", 2)
	graph := garbagecollector.NewDependencyGraphBuilder(ctx, gcMeta, mapper, garbagecollector.DefaultIgnoredResources(),
		objectOrMetadata, informersStarted)
	gc, err := garbagecollector.NewComposedGarbageCollector(ctx, b.client("generic-garbage-collector"), gcMeta, mapper, graph)
	if err != nil {
		return fmt.Errorf("garbage collector: %w", err)
	}
	gcDisco, err := discovery.NewDiscoveryClientForConfig(b.config("generic-garbage-collector", 1))
	if err != nil {
		return err
	}
	add(func(ctx context.Context) { gc.Run(ctx, 20, gcSyncPeriod) })
	add(func(ctx context.Context) { gc.Sync(ctx, gcDisco, gcSyncPeriod) })
	// New CRDs reach the mapper within this period.
	add(func(ctx context.Context) { wait.Until(mapper.Reset, 30*time.Second, ctx.Done()) })

	factory.Start(ctx.Done())
	defer factory.Shutdown()
	objectOrMetadata.Start(ctx.Done())
	close(informersStarted)

	var wg sync.WaitGroup
	for _, run := range loops {
		wg.Go(func() { run(ctx) })
	}
	wg.Wait()
	return nil
}

// builder makes each controller a client of its own, named in its user
// agent and with its own rate limit, as kube-controller-manager does with
// --use-service-account-credentials=false.
type builder struct{ base *rest.Config }

func (b builder) config(name string, qpsFactor float32) *rest.Config {
	c := rest.CopyConfig(b.base)
	c.UserAgent = rest.DefaultKubernetesUserAgent() + "/" + name
	c.QPS, c.Burst = clientQPS*qpsFactor, clientBurst
	return c
}

func (b builder) client(name string) kubernetes.Interface {
	return kubernetes.NewForConfigOrDie(b.config(name, 1))
}

func (b builder) metadata(name string, qpsFactor float32) metadata.Interface {
	return metadata.NewForConfigOrDie(b.config(name, qpsFactor))
}

// dropManagedFields is the informers' transform: the controllers never
// read managedFields, and they are much of an object's size.
func dropManagedFields(obj any) (any, error) {
	if a, err := meta.Accessor(obj); err == nil && a.GetManagedFields() != nil {
		a.SetManagedFields(nil)
	}
	return obj, nil
}

func readCA(file string) ([]byte, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	if _, err := certutil.ParseCertsPEM(b); err != nil {
		return nil, err
	}
	return b, nil
}
