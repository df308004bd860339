package node

import (
	"context"
	"fmt"
	"time"

	"github.com/charmbracelet/log"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
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
// or real. A pod whose nodeSelector the node's labels do not match stays
// Pending, with the PodScheduled condition kube-scheduler would give it.
func RunScheduler(ctx context.Context, client kubernetes.Interface, nodeName string, logger *log.Logger) {
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", "").String()
		}))
	nodes := informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", nodeName).String()
		}))
	nodeLister := nodes.Core().V1().Nodes().Lister()
	pods := factory.Core().V1().Pods().Lister()
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
	nodes.Start(ctx.Done())
	go func() { <-ctx.Done(); queue.ShutDown() }()
	for {
		key, quit := queue.Get()
		if quit {
			return
		}
		err := schedule(ctx, client, nodeName, key, pods, nodeLister)
		if err != nil && ctx.Err() == nil {
			logger.Warn("bind pod", "pod", key.String(), "err", err)
			queue.AddRateLimited(key)
		} else {
			queue.Forget(key)
		}
		queue.Done(key)
	}
}

// schedule binds the pod of key, or marks it unschedulable when its
// nodeSelector does not match the node's labels.
func schedule(ctx context.Context, client kubernetes.Interface, nodeName string, key cache.ObjectName,
	pods corelisters.PodLister, nodes corelisters.NodeLister) error {
	pod, err := pods.Pods(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if len(pod.Spec.NodeSelector) == 0 {
		return bind(ctx, client, nodeName, key)
	}
	node, err := nodes.Get(nodeName)
	if err != nil {
		return fmt.Errorf("node %s: %w", nodeName, err) // not in the cache yet: retried
	}
	if labels.SelectorFromSet(pod.Spec.NodeSelector).Matches(labels.Set(node.Labels)) {
		return bind(ctx, client, nodeName, key)
	}
	return markUnschedulable(ctx, client, pod)
}

// unschedulableMessage is kube-scheduler's message for one node whose
// labels a pod's nodeSelector does not match.
const unschedulableMessage = "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector."

// markUnschedulable sets the pod's PodScheduled condition to False,
// reason Unschedulable, once.
func markUnschedulable(ctx context.Context, client kubernetes.Interface, pod *corev1.Pod) error {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return nil
		}
	}
	pod = pod.DeepCopy()
	cond := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: unschedulableMessage, LastTransitionTime: metav1.Now()}
	replaced := false
	for i, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			pod.Status.Conditions[i], replaced = cond, true
		}
	}
	if !replaced {
		pod.Status.Conditions = append(pod.Status.Conditions, cond)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // deleted, or changed: its update enqueues it again
	}
	return err
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
