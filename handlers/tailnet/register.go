package tailnet

import (
	"context"
	"fmt"
	"reflect"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/tailplane/tailplane/crds/tailscale/v1alpha1"
	"github.com/tailplane/tailplane/handlers/lib/cluster"
	"github.com/tailplane/tailplane/handlers/lib/conditions"
	"github.com/tailplane/tailplane/handlers/lib/pipeline"
	"github.com/tailplane/tailplane/handlers/lib/resources"
	itailnet "github.com/tailplane/tailplane/internal/tailnet"
	"github.com/tailplane/tailplane/runtime"
)

// Retry is how soon a Tailnet that failed its check is checked again (the
// official 30 s: the user is likely fixing the OAuth client's scopes).
const Retry = 30 * time.Second

// Index names.
const (
	// IndexBySecret: Secret name -> the Tailnets naming it.
	IndexBySecret = "tailnets-by-secret"
	// IndexProxyGroups and IndexConnectors: Tailnet name -> the
	// ProxyGroups and Connectors whose spec.tailnet names it.
	IndexProxyGroups = "proxygroups-by-tailnet"
	IndexConnectors  = "connectors-by-tailnet"
	// IndexServices and IndexIngresses: Tailnet name -> the Services and
	// Ingresses ("namespace/name") whose pipeline.AnnotationTailnet names
	// it.
	IndexServices  = "services-by-tailnet"
	IndexIngresses = "ingresses-by-tailnet"
)

type module struct {
	d *cluster.Deps
	// newBackend builds a tailnet's backend (itailnet.NewTailscale).
	newBackend func(itailnet.Options) (itailnet.Backend, error)
}

// Register adds the Tailnet handlers: each Tailnet is checked on create,
// update, operator restart and whenever its Secret changes (a Watch through
// the runtime's queue); a failed check is repeated after Retry. Its
// ProxyGroups, Connectors, and Services and Ingresses (by
// pipeline.AnnotationTailnet) are handled again after each check, so that
// they follow the Tailnet's readiness. The finalizer is held only by valid
// Tailnets (the delete handler matches them alone); deleting a Tailnet drops
// its backend, as the official operator does, even while ProxyGroups or
// Connectors use it: they then report that their Tailnet is unavailable.
func Register(op *runtime.Operator, d *cluster.Deps) {
	m := &module{d: d, newBackend: func(o itailnet.Options) (itailnet.Backend, error) { return itailnet.NewTailscale(o) }}
	store := d.StateStore()
	op.On(resources.Tailnets, "tailnet-check", m.check, store,
		runtime.Causes(runtime.CauseCreate, runtime.CauseUpdate, runtime.CauseResume, runtime.CauseEnqueue))
	op.OnDelete(resources.Tailnets, "tailnet-release", func(_ context.Context, ev *runtime.Event) (any, error) {
		m.forget(ev.Object.GetName())
		return nil, nil
	}, store, runtime.When(isValid))
	// A Tailnet that never became valid has no finalizer: it goes at once.
	op.OnEvent(resources.Tailnets, "tailnet-gone", func(_ context.Context, typ watch.EventType, obj *unstructured.Unstructured) error {
		if typ == watch.Deleted {
			m.forget(obj.GetName())
		}
		return nil
	})
	op.Index(resources.Tailnets, IndexBySecret, func(obj *unstructured.Unstructured) map[string]any {
		name, _, _ := unstructured.NestedString(obj.Object, "spec", "credentials", "secretName")
		if name == "" {
			return nil
		}
		return map[string]any{name: "/" + obj.GetName()}
	})
	byTailnet := func(obj *unstructured.Unstructured) map[string]any {
		if name := pipeline.SpecTailnet(obj); name != "" {
			return map[string]any{name: "/" + obj.GetName()}
		}
		return nil
	}
	op.Index(resources.ProxyGroups, IndexProxyGroups, byTailnet)
	op.Index(resources.Connectors, IndexConnectors, byTailnet)
	byAnnotation := func(obj *unstructured.Unstructured) map[string]any {
		if name := pipeline.AnnotatedTailnet(obj); name != "" {
			return map[string]any{name: runtime.ObjectKey(obj.GetNamespace(), obj.GetName())}
		}
		return nil
	}
	op.Index(resources.Services, IndexServices, byAnnotation, d.Scope()...)
	op.Index(resources.Ingresses, IndexIngresses, byAnnotation, d.Scope()...)
	op.Watch(resources.Secrets, "tailnet-of-secret", func(_ watch.EventType, old, obj *unstructured.Unstructured) []runtime.Key {
		var keys []runtime.Key
		for _, o := range []*unstructured.Unstructured{old, obj} {
			if o != nil {
				keys = append(keys, d.Indexed(IndexBySecret, o.GetName(), resources.Tailnets)...)
			}
		}
		return keys
	}, runtime.Namespace(d.Settings.Namespace))
}

func isValid(obj *unstructured.Unstructured) bool {
	var tn v1alpha1.Tailnet
	if err := cluster.FromUnstructured(obj, &tn); err != nil {
		return false
	}
	return IsReady(tn.Status.Conditions)
}

// check reads the Tailnet's Secret, builds its backend, probes it, and
// records the outcome: registry, condition, Event.
func (m *module) check(ctx context.Context, ev *runtime.Event) (any, error) {
	var tn v1alpha1.Tailnet
	if err := cluster.FromUnstructured(ev.Object, &tn); err != nil {
		return nil, runtime.Permanent(err)
	}
	tn.APIVersion, tn.Kind = v1alpha1.GroupVersion.String(), "Tailnet"
	be, reason, msg, err := m.verify(ctx, &tn)
	if err != nil {
		return nil, err
	}
	if reason == ReasonValid {
		m.d.Tailnets.Set(tn.Name, m.d.Metrics.Tailnet(be))
		m.d.Log.Info("Tailnet is valid", "tailnet", tn.Name, "login_server", be.LoginServer())
	} else {
		m.d.Tailnets.SetNotReady(tn.Name, msg)
		if conditions.Changed(tn.Status.Conditions, Ready(reason, msg, tn.Generation)) {
			m.d.Post(&tn, corev1.EventTypeWarning, reason, msg)
		}
		m.d.Op.Enqueue(resources.Tailnets, tn.Name, Retry)
	}
	m.resyncUsers(tn.Name)
	conds := conditions.Set(tn.Status.Conditions, Ready(reason, msg, tn.Generation))
	if reflect.DeepEqual(conds, tn.Status.Conditions) {
		return nil, nil
	}
	return nil, m.d.PatchStatus(ctx, resources.Tailnets, "", tn.Name, map[string]any{"conditions": conds})
}

// verify returns the Tailnet's backend with ReasonValid, or the reason and
// message of why it cannot be used. Only a failure to read the Secret is
// an error.
func (m *module) verify(ctx context.Context, tn *v1alpha1.Tailnet) (itailnet.Backend, string, string, error) {
	ns, name := m.d.Settings.Namespace, tn.Spec.Credentials.SecretName
	s, err := m.d.Kube.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, ReasonInvalidSecret, SecretMissing(name, ns), nil
	}
	if err != nil {
		return nil, "", "", fmt.Errorf("read Secret %s/%s of Tailnet %s: %w", ns, name, tn.Name, err)
	}
	creds, msg := ReadSecret(s)
	if msg != "" {
		return nil, ReasonInvalidSecret, msg, nil
	}
	opts := itailnet.Options{LoginServer: tn.Spec.LoginURL, ClientID: creds.ClientID, ClientSecret: creds.ClientSecret}
	if creds.Audience != "" {
		opts.IDToken = m.serviceAccountToken(creds.Audience)
	}
	be, err := m.newBackend(opts)
	if err != nil {
		return nil, ReasonInvalidOAuth, fmt.Sprintf("invalid spec.loginUrl: %v", err), nil
	}
	if msg := ProbeMessage(probe(ctx, be)); msg != "" {
		return nil, ReasonInvalidOAuth, msg, nil
	}
	return be, ReasonValid, "", nil
}

// serviceAccountToken returns identity tokens for audience: tokens of the
// operator's own ServiceAccount that the API server issues (TokenRequest),
// as the official operator gets them for a Tailnet with an audience.
func (m *module) serviceAccountToken(audience string) func() (string, error) {
	return func() (string, error) {
		// The client library asks without a context.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		ns, sa := m.d.Settings.Namespace, m.d.Settings.ServiceAccount
		tr, err := m.d.Kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{Audiences: []string{audience}, ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
		if err != nil {
			return "", fmt.Errorf("a token of ServiceAccount %s/%s for audience %q: %w", ns, sa, audience, err)
		}
		return tr.Status.Token, nil
	}
}

// probe makes the official operator's read-only permission checks: they
// catch a missing scope without creating keys or services.
func probe(ctx context.Context, be itailnet.Backend) []Probe {
	_, devErr := be.ListDevices(ctx)
	_, keyErr := be.ListAuthKeys(ctx)
	_, svcErr := be.ListServices(ctx)
	return []Probe{{"list devices", devErr}, {"list auth keys", keyErr}, {"list tailscale services", svcErr}}
}

// forget drops a deleted Tailnet's backend and has its users handled again
// (they report the Tailnet unavailable).
func (m *module) forget(name string) {
	m.d.Tailnets.Remove(name)
	m.resyncUsers(name)
}

// resyncUsers has the ProxyGroups, Connectors, Services and Ingresses of
// Tailnet name handled again.
func (m *module) resyncUsers(name string) {
	m.d.EnqueueIndexed(IndexServices, name, resources.Services)
	m.d.EnqueueIndexed(IndexIngresses, name, resources.Ingresses)
	for _, k := range m.d.Indexed(IndexProxyGroups, name, resources.ProxyGroups) {
		m.d.Op.Enqueue(resources.ProxyGroups, k.Name, 0)
	}
	for _, k := range m.d.Indexed(IndexConnectors, name, resources.Connectors) {
		m.d.Op.Enqueue(resources.Connectors, k.Name, 0)
	}
}
