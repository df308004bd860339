package runtime

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
)

// Event reasons posted by the runtime.
const (
	ReasonHandled = "Handled"
	ReasonFailed  = "HandlerFailed"
	ReasonRetry   = "HandlerRetrying"
)

// newRecorder returns client-go's recorder: its correlator aggregates
// repeated Events and rate-limits them per object.
func newRecorder(kube kubernetes.Interface, component string) (record.EventBroadcaster, record.EventRecorder) {
	return newRecorderTo(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")}, component)
}

func newRecorderTo(sink record.EventSink, component string) (record.EventBroadcaster, record.EventRecorder) {
	b := record.NewBroadcaster()
	b.StartRecordingToSink(sink)
	return b, b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: component})
}

// Post records a Kubernetes Event about obj (type corev1.EventTypeNormal or
// EventTypeWarning), through the same rate-limited recorder as the runtime's.
func (o *Operator) Post(obj *unstructured.Unstructured, eventType, reason, message string) {
	o.recorder.Event(obj, eventType, reason, message)
}

// PostOnce records an Event about obj like Post, except that the first
// time since this operator started that it would post a given Event (same
// object UID, type, reason and message), it posts nothing if the cluster
// already holds that Event: an earlier run of the operator told it, and a
// restart, which handles every object again, should not tell every problem
// again (the recorder's correlator only knows its own process). Later
// calls post as Post does, so a problem that comes back while the
// operator runs is told again. The lookup and the post run on the poster
// goroutine, off the caller's path; when the lookup fails (no permission
// to list Events, say) the Event is posted, so nothing is lost. An Event
// about the very same version of the object (its resourceVersion) is not
// posted twice either: handling an unchanged object again tells nothing
// new.
func (o *Operator) PostOnce(obj *unstructured.Unstructured, eventType, reason, message string) {
	o.queueEvent(pending{ref: refOf(obj), typ: eventType, reason: reason, format: "%s", args: []any{message}, once: true})
}

// pending is an Event waiting for the poster goroutine.
type pending struct {
	ref                 *corev1.ObjectReference
	typ, reason, format string
	args                []any
	// once: post only if no such Event exists yet (PostOnce).
	once bool
}

// onceKey is what makes two PostOnce Events the same.
type onceKey struct{ uid, typ, reason, message string }

// refOf is the Event's involvedObject for obj.
func refOf(obj *unstructured.Unstructured) *corev1.ObjectReference {
	return &corev1.ObjectReference{
		APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind(), Namespace: obj.GetNamespace(),
		Name: obj.GetName(), UID: obj.GetUID(), ResourceVersion: obj.GetResourceVersion(),
	}
}

// queueEvent hands e to the poster goroutine; when the queue is full the
// Event is dropped, as client-go's recorder does.
func (o *Operator) queueEvent(e pending) {
	select {
	case o.eventQueue <- e:
	default:
	}
}

// postedBefore reports whether an Event like e (same object UID, type,
// reason and message) is in the cluster already: any such Event when
// first is set (the first time since the start), else only one about the
// same version of the object (its resourceVersion), so that a problem
// told for an object that changed since is told again.
func (o *Operator) postedBefore(ctx context.Context, e pending, first bool) bool {
	if o.kube == nil || e.ref.UID == "" {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	sel := fields.Set{"involvedObject.uid": string(e.ref.UID), "reason": e.reason, "type": e.typ}.AsSelector().String()
	list, err := o.kube.CoreV1().Events(e.ref.Namespace).List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		return false
	}
	msg := fmt.Sprintf(e.format, e.args...)
	for _, ev := range list.Items {
		if ev.Message == msg && (first || ev.InvolvedObject.ResourceVersion == e.ref.ResourceVersion) {
			return true
		}
	}
	return false
}

// post queues an Event about obj. Formatting it and handing it to the
// recorder happen on the poster goroutine, off the workers' path; when the
// queue is full the Event is dropped, as client-go's recorder does.
func (o *Operator) post(obj *unstructured.Unstructured, typ, reason, format string, args ...any) {
	o.queueEvent(pending{ref: refOf(obj), typ: typ, reason: reason, format: format, args: args})
}

// postEvents runs until done is closed.
func (o *Operator) postEvents(done <-chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { <-done; cancel() }()
	// checked holds the PostOnce Events seen since the start: after the
	// first, only an Event about the same object version counts.
	checked := map[onceKey]bool{}
	for {
		select {
		case e := <-o.eventQueue:
			if e.once {
				k := onceKey{uid: string(e.ref.UID), typ: e.typ, reason: e.reason, message: fmt.Sprintf(e.format, e.args...)}
				first := !checked[k]
				checked[k] = true
				if o.postedBefore(ctx, e, first) {
					continue
				}
			}
			o.recorder.Eventf(e.ref, e.typ, e.reason, e.format, e.args...)
		case <-done:
			return
		}
	}
}
