package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/tailplane/tailplane/handlers/lib/resources"
	"github.com/tailplane/tailplane/internal/tailnet"
	"github.com/tailplane/tailplane/runtime"
)

// TailnetRetry is how often a parent whose Tailnet cannot be used checks
// again (sooner: a Tailnet that becomes ready has its users handled again).
const TailnetRetry = 30 * time.Second

// ReasonTailnetGone is the Warning Event on a parent deleted after its
// Tailnet: its devices stay in that tailnet.
const ReasonTailnetGone = "TailnetUnavailable"

// AnnotationTailnet on a Service or Ingress served by a proxy of its own
// names the Tailnet its proxy joins (Tailplane's: the official operator
// always uses its own tailnet for them).
const AnnotationTailnet = "tailplane.dev/tailnet"

// LabelTailnet on a replica's config Secret records the Tailnet its device
// was made in (absent: the operator's own), so that a parent moved to
// another tailnet gets new devices there.
const LabelTailnet = "tailplane.dev/tailnet"

// SpecTailnet reads spec.tailnet, the Tailnet a ProxyGroup or Connector
// joins: a Module's Tailnet.
func SpecTailnet(obj *unstructured.Unstructured) string {
	name, _, _ := unstructured.NestedString(obj.Object, "spec", "tailnet")
	return name
}

// AnnotatedTailnet reads AnnotationTailnet: a Module's Tailnet for
// Services and Ingresses.
func AnnotatedTailnet(obj *unstructured.Unstructured) string {
	return obj.GetAnnotations()[AnnotationTailnet]
}

// tailnetOf is the name of the Tailnet obj's proxies join ("" for the
// operator's own).
func (m *Module) tailnetOf(obj *unstructured.Unstructured) string {
	if m.Tailnet == nil {
		return ""
	}
	return m.Tailnet(obj)
}

// TailnetUnavailable is the message of a parent whose Tailnet cannot be
// used; err names the Tailnet.
func TailnetUnavailable(err error) string {
	return fmt.Sprintf("failed to get tailnet client: %v", err)
}

// backend returns the tailnet backend of obj's proxies.
func (p *Pipeline) backend(m *Module, obj *unstructured.Unstructured) (tailnet.Backend, error) {
	return p.d.Tailnets.For(m.tailnetOf(obj))
}

// moveTailnet deletes obj's proxy when its replicas were made in another
// tailnet than the one obj now names (AnnotationTailnet changed): their
// devices, keys and objects go through the old tailnet's backend, and the
// pipeline then makes the proxy again in the new one.
func (p *Pipeline) moveTailnet(ctx context.Context, m *Module, obj *unstructured.Unstructured, want string) error {
	parent := m.parent(obj)
	proxy, err := p.ReadProxy(ctx, parent, 0)
	if err != nil {
		return err
	}
	for _, r := range proxy.Extra {
		if r.Config == nil || r.Config.Labels[LabelTailnet] == want {
			continue
		}
		old := r.Config.Labels[LabelTailnet]
		be, err := p.backendNamed(ctx, m, obj, old)
		if err != nil {
			return err
		}
		p.d.Log.Info("moving a proxy to another tailnet", "proxy", proxy.Names.Base, "from", old, "to", want)
		return p.deleteProxy(ctx, be, parent)
	}
	return nil
}

// unchecked reports whether err is the registry's answer for Tailnet name
// that exists but was not checked yet (right after an operator restart,
// before the Tailnet's resume handler ran): not worth a report, since the
// check has the Tailnet's users handled again.
func (p *Pipeline) unchecked(ctx context.Context, name string, err error) bool {
	if !errors.Is(err, tailnet.ErrNoTailnet) {
		return false
	}
	_, getErr := p.d.Dyn.Resource(resources.Tailnets).Get(ctx, name, metav1.GetOptions{})
	return getErr == nil
}

// cleanupBackend returns the backend through which obj's proxy's devices
// and keys are removed. When obj's Tailnet no longer exists (deleted
// before its users, which the official operator allows), there is none:
// nil, with a Warning Event on obj saying that the devices stay. When it
// exists but is not ready (yet), the error is retried.
func (p *Pipeline) cleanupBackend(ctx context.Context, m *Module, obj *unstructured.Unstructured) (tailnet.Backend, error) {
	name := m.tailnetOf(obj)
	// The tailnet the replicas were made in wins: obj may name another
	// one by now (its annotation went with the one asking for a proxy).
	proxy, err := p.ReadProxy(ctx, m.parent(obj), 0)
	if err != nil {
		return nil, err
	}
	for _, r := range proxy.Extra {
		if r.Config != nil {
			name = r.Config.Labels[LabelTailnet]
			break
		}
	}
	return p.backendNamed(ctx, m, obj, name)
}

// backendNamed is cleanupBackend for Tailnet name.
func (p *Pipeline) backendNamed(ctx context.Context, m *Module, obj *unstructured.Unstructured, name string) (tailnet.Backend, error) {
	be, err := p.d.Tailnets.For(name)
	if err == nil {
		return be, nil
	}
	_, getErr := p.d.Dyn.Resource(resources.Tailnets).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(getErr):
		p.d.Post(obj, corev1.EventTypeWarning, ReasonTailnetGone, fmt.Sprintf(
			"Tailnet %q no longer exists: the devices of this %s's proxies are left in that tailnet; delete them in its admin console", name, m.Kind))
		p.d.Log.Warn("Tailnet gone: leaving the proxy's devices in it", "tailnet", name, "parent", obj.GetNamespace()+"/"+obj.GetName())
		return nil, nil
	case getErr != nil:
		return nil, fmt.Errorf("read Tailnet %s: %w", name, getErr)
	}
	return nil, runtime.Temporary(err, TailnetRetry)
}
