package runtime

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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

// pending is an Event waiting for the poster goroutine.
type pending struct {
	ref                 *corev1.ObjectReference
	typ, reason, format string
	args                []any
}

// post queues an Event about obj. Formatting it and handing it to the
// recorder happen on the poster goroutine, off the workers' path; when the
// queue is full the Event is dropped, as client-go's recorder does.
func (o *Operator) post(obj *unstructured.Unstructured, typ, reason, format string, args ...any) {
	ref := &corev1.ObjectReference{
		APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind(), Namespace: obj.GetNamespace(),
		Name: obj.GetName(), UID: obj.GetUID(), ResourceVersion: obj.GetResourceVersion(),
	}
	select {
	case o.eventQueue <- pending{ref: ref, typ: typ, reason: reason, format: format, args: args}:
	default:
	}
}

// postEvents runs until done is closed.
func (o *Operator) postEvents(done <-chan struct{}) {
	for {
		select {
		case e := <-o.eventQueue:
			o.recorder.Eventf(e.ref, e.typ, e.reason, e.format, e.args...)
		case <-done:
			return
		}
	}
}
