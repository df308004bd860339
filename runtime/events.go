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
