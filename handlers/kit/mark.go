package kit

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/tailplane/tailplane/handlers/proxyclass"
	"github.com/tailplane/tailplane/handlers/proxyset"
	"github.com/tailplane/tailplane/internal/proxystate"
	"github.com/tailplane/tailplane/runtime"
)

// The roles of proxies, the values of LabelProxyRole: what a parent's proxy
// does. Exposed and egress Services share the parent type "svc", so the
// role is what tells whose proxy a Service has.
const (
	RoleIngressL4 = "ingress-l4"
	RoleIngressL7 = "ingress-l7"
	RoleEgress    = "egress"
)

// LabelProxyRole is put on a proxy's state Secret (in the operator
// namespace): the parent has a proxy of that role for as long as the Secret
// exists. It replaces a mark on the parent, which users' GitOps tools would
// report as drift. The state Secret is applied first and deleted last, so
// it covers every other object of the proxy.
const LabelProxyRole = "tailplane.dev/proxy-role"

// IndexProxiesByRole: "<role>/<state Secret name>" -> state Secret name.
const IndexProxiesByRole = "proxies-by-role"

// StateStorageName names the ConfigMaps (in the operator namespace) that
// keep the runtime's state of Services, Ingresses and IngressClasses.
const StateStorageName = "tailplane-state"

// roleOf is the role of a proxy kind.
func roleOf(kind proxyclass.ProxyKind) string {
	switch kind {
	case proxyclass.L7:
		return RoleIngressL7
	case proxyclass.Egress:
		return RoleEgress
	}
	return RoleIngressL4
}

// indexProxies indexes the state Secrets by role (the same watch as
// WatchProxyState's).
func (d *Deps) indexProxies(sel string) {
	d.Op.Index(Secrets, IndexProxiesByRole, func(obj *unstructured.Unstructured) map[string]any {
		role := obj.GetLabels()[LabelProxyRole]
		if role == "" {
			return nil
		}
		return map[string]any{role + "/" + obj.GetName(): obj.GetName()}
	}, runtime.Namespace(d.Settings.Namespace), runtime.Selector(sel))
}

// stateSelector selects the managed state Secrets.
func stateSelector() string {
	return labels.SelectorFromSet(labels.Set{proxystate.LabelManaged: "true", proxystate.LabelSecretType: proxyset.SecretTypeState}).String()
}

// hasProxy reports whether the parent (namespace, name) of parentType has a
// proxy of role.
func (d *Deps) hasProxy(role, parentType, namespace, name string) bool {
	x := d.Op.GetIndex(IndexProxiesByRole)
	return x != nil && len(x.Get(role+"/"+proxyset.NamesFor(parentType, namespace, name).StateSecret)) > 0
}

// HasProxy matches parents of parentType that have a proxy of role: the
// handlers keep matching a parent that stopped asking for a proxy until its
// proxy is gone. A parent with the previous release's mark (LegacyMark) has
// one too: that release's state Secrets have no role label.
func (d *Deps) HasProxy(role, parentType string) runtime.Predicate {
	return func(obj *unstructured.Unstructured) bool {
		return obj.GetAnnotations()[LegacyMark] == role || d.hasProxy(role, parentType, obj.GetNamespace(), obj.GetName())
	}
}

// proxyGoneWait bounds how long a release waits for the watch to report its
// proxy's state Secret deleted.
const proxyGoneWait = 10 * time.Second

// WaitProxyGone waits until the watch reported the deletion of a released
// parent's proxy, so that the handler cycle that released it ends with the
// parent matching no handler: the runtime then removes the finalizer and
// forgets the parent's state.
func (d *Deps) WaitProxyGone(ctx context.Context, role, parentType, namespace, name string) error {
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, proxyGoneWait, true, func(context.Context) (bool, error) {
		return !d.hasProxy(role, parentType, namespace, name), nil
	})
	if err != nil {
		return fmt.Errorf("proxy of %s/%s still seen after its deletion: %w", namespace, name, err)
	}
	return nil
}

// StateStore is the option that keeps the runtime's state of a resource in
// ConfigMaps of the operator namespace (StateStorageName) instead of on the
// objects: for the users' objects and those the operator only reads.
func (d *Deps) StateStore() runtime.Option { return runtime.Store(d.stateStore) }

// ForUsersObjects returns opts plus the watch-namespace option and
// StateStore.
func (d *Deps) ForUsersObjects(opts ...runtime.Option) []runtime.Option {
	return d.Scope(append(opts, d.StateStore())...)
}
