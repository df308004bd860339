package ingress

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/tailplane/tailplane/handlers/ingressclass"
	"github.com/tailplane/tailplane/handlers/lib/cluster"
	"github.com/tailplane/tailplane/handlers/lib/ingressroutes"
	"github.com/tailplane/tailplane/handlers/lib/pipeline"
	"github.com/tailplane/tailplane/handlers/lib/proxyclassrules"
	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/handlers/lib/resources"
	"github.com/tailplane/tailplane/handlers/plugin"
	"github.com/tailplane/tailplane/runtime"
)

// Role is the role of Ingress proxies.
const Role = cluster.RoleIngressL7

// Event reasons of the apply step (beyond the render step's).
const (
	// ReasonInvalidIngress is the official reason for an Ingress whose
	// hostname or tags are invalid, or whose hostname is taken.
	ReasonInvalidIngress = "InvalidIngressConfiguration"
	// ReasonProxyPending says the Ingress waits for its ProxyClass.
	ReasonProxyPending = "ProxyPending"
	// ReasonProxyFailed says the tailnet API refused the proxy's key, or the
	// API server the proxy's objects.
	ReasonProxyFailed = "ProxyFailed"
	// ReasonTLSSecretMissing says the tls secretName names no Secret.
	ReasonTLSSecretMissing = "TLSSecretMissing"
	// ReasonProxyRenaming says the hostname changed and the device does
	// not have the new name yet.
	ReasonProxyRenaming = pipeline.ReasonProxyRenaming
)

type module struct{ d *cluster.Deps }

// Register adds the Ingress module to the pipeline: create, update and
// resume apply the proxy; delete (and an Ingress that left the class)
// removes the device, the objects, then the finalizer. An index of backend
// Services re-handles an Ingress when one of its backends changes
// (ClusterIP, ports, created, deleted).
func Register(op *runtime.Operator, d *cluster.Deps, p *pipeline.Pipeline) {
	m := &module{d: d}
	p.Register(op, pipeline.Module{
		ID: "ingress", Resource: resources.Ingresses, Kind: "Ingress",
		ParentType: proxyset.ParentIngress, Role: Role, ProxyKind: proxyclassrules.L7,
		IsOurs: m.isOurs, Plan: m.plan, Report: m.report, Release: m.release,
		Tailnet: pipeline.AnnotatedTailnet,
	})
	op.Index(resources.Ingresses, cluster.IndexIngressesByBackend, func(obj *unstructured.Unstructured) map[string]any {
		if !m.isOurs(obj) {
			return nil
		}
		var ing networkingv1.Ingress
		if cluster.FromUnstructured(obj, &ing) != nil {
			return nil
		}
		out := map[string]any{}
		for _, svc := range ingressroutes.BackendServices(&ing) {
			out[runtime.ObjectKey(ing.Namespace, svc)] = runtime.ObjectKey(ing.Namespace, ing.Name)
		}
		return out
	}, d.Scope()...)
	op.Timer(resources.Ingresses, "ingress-tls-refresh", d.CertRefresh, func(ctx context.Context, ev *runtime.Event) (any, error) {
		return nil, m.refreshTLS(ctx, p, ev)
	}, d.Scope(runtime.When(func(obj *unstructured.Unstructured) bool {
		var ing networkingv1.Ingress
		return cluster.FromUnstructured(obj, &ing) == nil && IsOurs(&ing, d.Settings.IngressClassName) && ingressroutes.CustomTLS(&ing)
	}))...)
	op.Watch(resources.Services, "ingress-backends", func(_ watch.EventType, _, obj *unstructured.Unstructured) []runtime.Key {
		return d.Indexed(cluster.IndexIngressesByBackend, runtime.ObjectKey(obj.GetNamespace(), obj.GetName()), resources.Ingresses)
	}, d.Scope()...)
}

func decode(obj *unstructured.Unstructured) (*networkingv1.Ingress, error) {
	var ing networkingv1.Ingress
	if err := cluster.FromUnstructured(obj, &ing); err != nil {
		return nil, runtime.Permanent(err)
	}
	ing.APIVersion, ing.Kind = "networking.k8s.io/v1", "Ingress"
	return &ing, nil
}

func (m *module) isOurs(obj *unstructured.Unstructured) bool {
	ing, err := decode(obj)
	return err == nil && IsOurs(ing, m.d.Settings.IngressClassName)
}

// plan is Plan over what the cluster says (the IngressClass, the Ingress's
// tailnet, its backends and plugins), with its own TLS certificate's copy as
// an extra object. An Ingress refused by its class or with no servable
// backend gets no plan: its proxy, if any, keeps serving what it had.
func (m *module) plan(ctx context.Context, obj *unstructured.Unstructured) (*pipeline.Plan, error) {
	ing, err := decode(obj)
	if err != nil {
		return nil, err
	}
	s := m.d.Settings
	class, err := m.d.Kube.NetworkingV1().IngressClasses().Get(ctx, s.IngressClassName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		class, err = nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read IngressClass %s: %w", s.IngressClassName, err)
	}
	if v := ingressclass.Check(class, s.IngressClassName); v.IngressMessage != "" {
		m.d.Post(ing, corev1.EventTypeWarning, v.Reason, v.IngressMessage)
		if v.Refused {
			return nil, nil // handled again when the class changes
		}
	}
	be, err := m.d.Tailnets.For(pipeline.AnnotatedTailnet(obj))
	if err != nil {
		return nil, err // the pipeline checked it already: a race with the Tailnet's handler
	}
	plugins, pluginSecrets, err := plugin.Targeting(ctx, m.d, "Ingress", ing.Namespace, ing.Name, ing.Labels)
	if err != nil {
		return nil, err
	}
	plan, problems, err := Plan(ing, s, Inputs{Lookup: ingressroutes.Lookup(ctx, m.d.Kube, ing.Namespace), Tailnet: be,
		Plugins: plugins, PluginSecrets: pluginSecrets})
	m.post(ing, problems)
	if errors.Is(err, ingressroutes.ErrNoValidBackends) {
		return nil, nil // the proxy, if any, keeps serving what it had
	}
	if err != nil || plan.Invalid != "" {
		return plan, err
	}
	if ingressroutes.CustomTLS(ing) {
		copied, err := m.tlsCopy(ctx, ing, TLSSecretName(ing))
		if err != nil {
			return nil, err
		}
		if copied != nil {
			plan.Extra = func(*proxyset.Objects) []any { return []any{copied} }
		}
	}
	return plan, nil
}

// report posts Events (Ingresses have no conditions) and writes
// status.loadBalancer.ingress once the proxy serves under its name.
func (m *module) report(ctx context.Context, obj *unstructured.Unstructured, out pipeline.Outcome) error {
	ing, err := decode(obj)
	if err != nil {
		return err
	}
	switch out.Stage {
	case pipeline.Invalid:
		m.d.Post(ing, corev1.EventTypeWarning, ReasonInvalidIngress, "unable to provision proxy resources: "+out.Message)
		return nil
	case pipeline.Waiting:
		m.d.Post(ing, corev1.EventTypeWarning, ReasonProxyPending, out.Message)
		return nil
	case pipeline.Failed:
		m.d.Post(ing, corev1.EventTypeWarning, ReasonProxyFailed, out.Message)
		if out.Cause != pipeline.CauseConfigError {
			return nil
		}
	case pipeline.Pending:
		if out.Cause == pipeline.CauseRenaming {
			// No address until control gave the device its new name,
			// since the old one stops resolving.
			m.d.Post(ing, corev1.EventTypeNormal, ReasonProxyRenaming, out.Message)
		}
	}
	var dev proxyset.Device
	if len(out.Serving) > 0 {
		dev = out.Serving[0]
	}
	return m.setStatus(ctx, ing, dev)
}

func (m *module) post(ing *networkingv1.Ingress, problems []ingressroutes.Problem) {
	for _, p := range problems {
		m.d.Post(ing, p.Type, p.Reason, p.Message)
	}
}

// tlsCopy returns the copy, in the operator namespace, of the Secret named in
// tls[0].secretName (nil with a Warning Event when it does not exist yet).
func (m *module) tlsCopy(ctx context.Context, ing *networkingv1.Ingress, copyName string) (*corev1.Secret, error) {
	secret, err := m.userTLSSecret(ctx, ing)
	if err != nil {
		return nil, err
	}
	if secret == nil {
		m.d.Post(ing, corev1.EventTypeWarning, ReasonTLSSecretMissing, fmt.Sprintf("TLS Secret %s/%s does not exist", ing.Namespace, ing.Spec.TLS[0].SecretName))
		return nil, nil
	}
	return m.copyOf(ing, secret, copyName), nil
}

// userTLSSecret reads the Secret named in tls[0].secretName; nil when it
// does not exist.
func (m *module) userTLSSecret(ctx context.Context, ing *networkingv1.Ingress) (*corev1.Secret, error) {
	src := ing.Spec.TLS[0].SecretName
	secret, err := m.d.Kube.CoreV1().Secrets(ing.Namespace).Get(ctx, src, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read TLS Secret %s/%s: %w", ing.Namespace, src, err)
	}
	return secret, nil
}

// copyOf is the copy of the user's TLS Secret that the proxy reads.
func (m *module) copyOf(ing *networkingv1.Ingress, secret *corev1.Secret, copyName string) *corev1.Secret {
	return &corev1.Secret{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: copyName, Namespace: m.d.Settings.Namespace,
			Labels: Parent(ing).Labels()},
		Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: secret.Data[corev1.TLSCertKey], corev1.TLSPrivateKeyKey: secret.Data[corev1.TLSPrivateKeyKey]},
	}
}

// refreshTLS copies the Ingress's TLS Secret again (an unchanged copy costs
// no API call within Apply's cache minute, then one no-op apply); the proxy
// serves the new key pair as soon as its copy changes. Before the proxy
// exists there is nothing to refresh.
func (m *module) refreshTLS(ctx context.Context, p *pipeline.Pipeline, ev *runtime.Event) error {
	ing, err := decode(ev.Object)
	if err != nil {
		return err
	}
	proxy, err := p.ReadProxy(ctx, Parent(ing), 1)
	if err != nil || proxy.Replicas[0].Config == nil {
		return err
	}
	secret, err := m.userTLSSecret(ctx, ing)
	if err != nil || secret == nil {
		return err // a missing Secret was reported by the Ingress's own handler
	}
	return m.d.Apply(ctx, m.copyOf(ing, secret, TLSSecretName(ing)))
}

// release removes the status of an Ingress that left the class.
func (m *module) release(ctx context.Context, obj *unstructured.Unstructured, _ []proxyset.Device) error {
	ing, err := decode(obj)
	if err != nil || len(ing.Status.LoadBalancer.Ingress) == 0 {
		return err
	}
	return m.d.PatchStatus(ctx, resources.Ingresses, ing.Namespace, ing.Name, map[string]any{"loadBalancer": map[string]any{"ingress": nil}})
}

// setStatus writes status.loadBalancer.ingress (hostname and ports) when it
// changed.
func (m *module) setStatus(ctx context.Context, ing *networkingv1.Ingress, dev proxyset.Device) error {
	lb := LoadBalancerIngress(ing, dev)
	if be, err := m.d.Tailnets.For(ing.Annotations[pipeline.AnnotationTailnet]); err == nil && len(lb) > 0 {
		if plain, _ := Certificates(ing, be); plain {
			lb[0].Ports = []networkingv1.IngressPortStatus{{Port: 80, Protocol: corev1.ProtocolTCP}}
		}
	}
	if reflect.DeepEqual(lb, ing.Status.LoadBalancer.Ingress) || (len(lb) == 0 && len(ing.Status.LoadBalancer.Ingress) == 0) {
		return nil
	}
	return m.d.PatchStatus(ctx, resources.Ingresses, ing.Namespace, ing.Name, map[string]any{"loadBalancer": map[string]any{"ingress": lb}})
}
