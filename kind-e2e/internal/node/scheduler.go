package node

import (
	"context"
	"time"

	"github.com/charmbracelet/log"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// schedule binds every pending pod of the default scheduler to this node:
// with one node there is nothing to choose.
func (n *Node) schedule(ctx context.Context) {
	RunScheduler(ctx, n.client, n.cfg.Name, n.log)
}

// RunScheduler binds every pending pod of the default scheduler to the node
// nodeName until ctx ends: devcluster's scheduler for its one node, process
// or real.
func RunScheduler(ctx context.Context, client kubernetes.Interface, nodeName string, logger *log.Logger) {
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", "").String()
		}))
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[cache.ObjectName]())
	defer queue.ShutDown()
	enqueue := func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok && p.Spec.NodeName == "" && p.DeletionTimestamp == nil &&
			(p.Spec.SchedulerName == "" || p.Spec.SchedulerName == corev1.DefaultSchedulerName) {
			queue.Add(cache.MetaObjectToName(p))
		}
	}
	_, _ = factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, o any) { enqueue(o) },
	})
	factory.Start(ctx.Done())
	go func() { <-ctx.Done(); queue.ShutDown() }()
	for {
		key, quit := queue.Get()
		if quit {
			return
		}
		err := bind(ctx, client, nodeName, key)
		if err != nil && ctx.Err() == nil {
			logger.Warn("bind pod", "pod", key.String(), "err", err)
			queue.AddRateLimited(key)
		} else {
			queue.Forget(key)
		}
		queue.Done(key)
	}
}

func bind(ctx context.Context, client kubernetes.Interface, nodeName string, key cache.ObjectName) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := client.CoreV1().Pods(key.Namespace).Bind(ctx, &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
		Target:     corev1.ObjectReference{Kind: "Node", Name: nodeName},
	}, metav1.CreateOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // deleted, or bound already
	}
	return err
}
