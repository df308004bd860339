package pipeline

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/handlers/lib/resources"
	"github.com/tailplane/tailplane/internal/proxystate"
	"github.com/tailplane/tailplane/runtime"
)

// IndexProxiesByRole: "<role>/<parent namespace>/<parent name label>" ->
// that parent's state Secrets of that role, with their labels and only the
// keys the operator reads (cachedState).
const IndexProxiesByRole = "proxies-by-role"

// stateSelector selects the managed state Secrets.
func stateSelector() string {
	return labels.SelectorFromSet(labels.Set{proxystate.LabelManaged: "true", proxystate.LabelSecretType: proxyset.SecretTypeState}).String()
}

// watchState indexes the state Secrets by role (hasProxy) and re-handles a
// parent whenever one of its replicas' state Secrets changes (the proxy
// wrote device_id, device_fqdn, device_ips or config_error) or is deleted.
// A deletion also drops what the operator remembers having applied for that
// proxy, so that the parent's next cycle applies every object again instead
// of skipping the unchanged ones for up to a minute: that matters when the
// deletion was not the pipeline's (by hand, or a tool removing a proxy's
// objects) and costs one full apply when it was (a replica scaled away).
// The watch covers only managed state Secrets in the operator namespace.
func (p *Pipeline) watchState() {
	opts := p.StateScope()
	p.d.Op.Index(resources.Secrets, IndexProxiesByRole, func(obj *unstructured.Unstructured) map[string]any {
		l := obj.GetLabels()
		role := l[proxyset.LabelProxyRole]
		if role == "" {
			return nil
		}
		k := proxyset.Key{Role: role, Namespace: l[proxystate.LabelParentNamespace], Name: l[proxystate.LabelParentName]}
		return map[string]any{roleKey(k): cachedState(obj)}
	}, opts...)
	p.d.Op.Watch(resources.Secrets, "proxy-state", func(typ watch.EventType, old, obj *unstructured.Unstructured) []runtime.Key {
		l := obj.GetLabels()
		res, ok := p.resourceOf(l[proxyset.LabelProxyRole])
		if !ok {
			res, ok = legacyResource(l[proxystate.LabelParentType])
		}
		if !ok || l[proxystate.LabelParentName] == "" {
			return nil
		}
		if typ == watch.Deleted {
			if base, ok := replicaBase(obj.GetName()); ok {
				p.d.ForgetProxy(obj.GetNamespace(), base)
			}
		} else if !stateChanged(typ, old, obj) {
			return nil
		}
		return []runtime.Key{{Resource: res, Namespace: l[proxystate.LabelParentNamespace], Name: l[proxystate.LabelParentName]}}
	}, opts...)
}

// StateScope are the options of a watch of the proxies' state Secrets (the
// managed ones, in the operator namespace): other modules' watches of them
// with these options share the pipeline's informer.
func (p *Pipeline) StateScope() []runtime.Option {
	return []runtime.Option{runtime.Namespace(p.d.Settings.Namespace), runtime.Selector(stateSelector())}
}

// legacyResource is the parent resource of a state Secret without a role
// label (from the release before roles).
func legacyResource(parentType string) (res schema.GroupVersionResource, ok bool) {
	switch parentType {
	case proxyset.ParentService:
		return resources.Services, true
	case proxyset.ParentIngress:
		return resources.Ingresses, true
	}
	return res, false
}

// cachedState is a state Secret as the index keeps it: its name and labels
// and the keys in stateKeys (and the Pod UID config_applied is compared
// with), not tailscaled's own state.
func cachedState(obj *unstructured.Unstructured) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: obj.GetName(), Namespace: obj.GetNamespace(), Labels: obj.GetLabels()},
		Data: map[string][]byte{}}
	data, _, _ := unstructured.NestedStringMap(obj.Object, "data")
	for _, k := range append(stateKeys, proxystate.KeyPodUID) {
		if v, ok := data[k]; ok {
			if b, err := base64.StdEncoding.DecodeString(v); err == nil {
				s.Data[k] = b
			}
		}
	}
	return s
}

// cachedStates are the state Secrets of parent's proxy in the index (nil
// when there is no index).
func (p *Pipeline) cachedStates(parent proxyset.Parent) []*corev1.Secret {
	x := p.d.Op.GetIndex(IndexProxiesByRole)
	if x == nil {
		return nil
	}
	out := []*corev1.Secret{}
	for _, v := range x.Get(roleKey(parent.Key())) {
		if s, ok := v.(*corev1.Secret); ok {
			out = append(out, s)
		}
	}
	return out
}

// roleKey is a proxy's key in IndexProxiesByRole: "role/namespace/name",
// with the name as the labels have it (TruncateLabelValue leaves a label's
// value as it is).
func roleKey(k proxyset.Key) string {
	return k.Role + "/" + k.Namespace + "/" + proxyset.TruncateLabelValue(k.Name)
}

// hasProxy reports whether the parent k names has a proxy of k's role: a
// state Secret of any replica.
func (p *Pipeline) hasProxy(k proxyset.Key) bool {
	x := p.d.Op.GetIndex(IndexProxiesByRole)
	return x != nil && len(x.Get(roleKey(k))) > 0
}

// hasProxyPredicate matches parents that have a proxy of m's role: the
// handlers keep matching a parent that stopped asking for a proxy until its
// proxy is gone. A parent with the mark of the release before roles
// (LegacyMark) has one too: that release's state Secrets have no role
// label.
func (p *Pipeline) hasProxyPredicate(m *Module) runtime.Predicate {
	return func(obj *unstructured.Unstructured) bool {
		return obj.GetAnnotations()[LegacyMark] == m.Role || p.hasProxy(m.parent(obj).Key())
	}
}

// proxyGoneWait bounds how long a release waits for the watch to report its
// proxy's state Secrets deleted.
const proxyGoneWait = 10 * time.Second

// waitProxyGone waits until the watch reported the deletion of a released
// parent's proxy, so that the cycle that released it ends with the parent
// matching no handler: the runtime then removes the finalizer and forgets
// the parent's state.
func (p *Pipeline) waitProxyGone(ctx context.Context, m *Module, parent proxyset.Parent) error {
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, proxyGoneWait, true, func(context.Context) (bool, error) {
		return !p.hasProxy(parent.Key()), nil
	})
	if err != nil {
		return fmt.Errorf("proxy of %s %s/%s still seen after its deletion: %w", m.Kind, parent.Namespace, parent.Name, err)
	}
	return nil
}

// stateKeys are the keys of a state Secret the operator acts on; tailscaled's
// own keys change often and matter to nobody else.
var stateKeys = []string{proxystate.KeyDeviceID, proxystate.KeyDeviceFQDN, proxystate.KeyDeviceIPs, proxystate.KeyConfigError,
	proxystate.KeyDeviceAdvertisedRoutes, proxystate.KeyDeviceApprovedRoutes, proxystate.KeyServices, proxystate.KeyConfigApplied}

// replicaBase is the proxy base name of a replica's state Secret
// ("<base>-<ordinal>").
func replicaBase(stateSecret string) (string, bool) {
	i := strings.LastIndexByte(stateSecret, '-')
	if i <= 0 {
		return "", false
	}
	_, ok := proxyset.OrdinalOf(stateSecret[:i], stateSecret)
	return stateSecret[:i], ok
}

// stateChanged reports whether the operator-relevant keys of a state Secret
// changed: on an update, from the old state; when it appears (created, or
// listed after a restart), whether it has any. A new Secret without them
// (the operator just created it) is no news.
func stateChanged(typ watch.EventType, old, obj *unstructured.Unstructured) bool {
	switch typ {
	case watch.Modified:
		if old != nil {
			return stateFingerprint(old) != stateFingerprint(obj)
		}
	}
	return stateFingerprint(obj) != strings.Repeat("\x00", len(stateKeys))
}

func stateFingerprint(obj *unstructured.Unstructured) string {
	data, _, _ := unstructured.NestedStringMap(obj.Object, "data")
	var b strings.Builder
	for _, k := range stateKeys {
		b.WriteString(data[k])
		b.WriteByte(0)
	}
	return b.String()
}
