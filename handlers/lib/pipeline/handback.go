package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tailplane/tailplane/handlers/lib/adoption"
	"github.com/tailplane/tailplane/handlers/lib/cluster"
	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/handlers/lib/resources"
	"github.com/tailplane/tailplane/internal/proxystate"
	"github.com/tailplane/tailplane/runtime"
)

// ReasonHandedBack is the Event posted on a parent whose device a
// hand-back left for the official operator.
const ReasonHandedBack = "HandedBackProxy"

// RegisterHandBack makes op, instead of handling anything, hand every
// proxy back to the official operator when it starts (HandBack), then
// stand by: the operator of settings.Settings.HandBack. A failed hand-back
// fails the start, and the next process tries again.
func RegisterHandBack(op *runtime.Operator, d *cluster.Deps) {
	p := newPipeline(d)
	op.OnStartup(func(ctx context.Context) error {
		owner, err := p.d.OperatorOwner(ctx)
		if err != nil {
			return err
		}
		p.handBackOwner = owner
		res, err := p.HandBack(ctx)
		if err != nil {
			return err
		}
		d.Log.Info("hand-back finished: uninstall Tailplane and install the official operator (docs/migration.md)",
			"handedBack", len(res.HandedBack), "removed", len(res.Removed))
		return nil
	})
}

// HandBackResult is what HandBack did with each of Tailplane's proxies.
type HandBackResult struct {
	// HandedBack are the proxies left in the official operator's layout,
	// as "<base>: <devices>".
	HandedBack []string
	// Removed are the proxies the official operator has no layout for
	// (Gateways, say), deleted with their devices, as "<base>: <why>".
	Removed []string
}

// HandBack leaves every proxy of Tailplane's in the operator namespace for
// the official operator (docs/migration.md, "Going back"): it rewrites the
// proxy's state Secrets in the official layout (adoption.PlanHandBack),
// keeping each device's identity and certificates, and ends Tailplane's
// proxy (stopOrKeep: serving until the release goes, when there is an
// operator Deployment to give it to). It then moves the groups' Tailscale
// Service certificates to the official Secrets and deletes the runtime's
// state ConfigMaps. A proxy the official operator has no layout for is
// deleted with its devices. It is idempotent: a hand-back cut off part-way
// is finished by running it again, since a proxy's state Secrets lose
// Tailplane's labels last. The operator must not handle parents meanwhile:
// it would make the proxies again.
func (p *Pipeline) HandBack(ctx context.Context) (HandBackResult, error) {
	var res HandBackResult
	ns := p.d.Settings.Namespace
	sel := proxyset.LabelProxyRole + "," + proxystate.LabelSecretType + "=" + proxyset.SecretTypeState
	list, err := p.d.Kube.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return res, fmt.Errorf("list Tailplane's state Secrets in %s: %w", ns, err)
	}
	byBase := map[string][]corev1.Secret{}
	for _, s := range list.Items {
		if i := strings.LastIndexByte(s.Name, '-'); i > 0 {
			byBase[s.Name[:i]] = append(byBase[s.Name[:i]], s)
		}
	}
	var errs []error
	for _, base := range slices.Sorted(maps.Keys(byBase)) {
		states := byBase[base]
		slices.SortFunc(states, func(a, b corev1.Secret) int { return strings.Compare(a.Name, b.Name) })
		handedBack, summary, err := p.handBackProxy(ctx, base, states)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("hand back proxy %s: %w", base, err))
		case handedBack:
			res.HandedBack = append(res.HandedBack, base+": "+summary)
		default:
			res.Removed = append(res.Removed, base+": "+summary)
		}
	}
	errs = append(errs, p.handBackCerts(ctx))
	// The runtime's records of the objects it handled: the official
	// operator has none, and a later Tailplane starts afresh.
	state, err := p.d.Kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{LabelSelector: cluster.StateStorageSelector})
	if err != nil {
		errs = append(errs, fmt.Errorf("list the operator's state ConfigMaps: %w", err))
	} else {
		for _, cm := range state.Items {
			if err := ignoreNotFound(p.d.Kube.CoreV1().ConfigMaps(ns).Delete(ctx, cm.Name, metav1.DeleteOptions{})); err != nil {
				errs = append(errs, fmt.Errorf("delete state ConfigMap %s: %w", cm.Name, err))
			}
		}
	}
	return res, errors.Join(errs...)
}

// handBackProxy hands back the proxy base, whose replicas' state Secrets
// are states, and says whether it did (or deleted the proxy) and what
// became of its devices (or why it was deleted).
func (p *Pipeline) handBackProxy(ctx context.Context, base string, states []corev1.Secret) (bool, string, error) {
	l := states[0].Labels
	parentLabels := map[string]string{proxystate.LabelManaged: "true", proxystate.LabelParentName: l[proxystate.LabelParentName],
		proxystate.LabelParentNamespace: l[proxystate.LabelParentNamespace], proxystate.LabelParentType: l[proxystate.LabelParentType]}
	proxy := adoption.HandBackProxy{Type: l[proxystate.LabelParentType], Namespace: l[proxystate.LabelParentNamespace],
		Name: l[proxystate.LabelParentName], Base: base, States: states}
	parent, err := p.handBackParent(ctx, proxy.Type, proxy.Namespace, proxy.Name)
	if err != nil {
		return false, "", err
	}
	if parent != nil && proxy.Type == adoptionTypeProxyGroup {
		proxy.Owner = &metav1.OwnerReference{APIVersion: parent.GetAPIVersion(), Kind: parent.GetKind(), Name: parent.GetName(),
			UID: parent.GetUID(), Controller: ptrTo(true), BlockOwnerDeletion: ptrTo(true)}
	}
	plan, planErr := adoption.PlanHandBack(proxy, p.d.Settings.Namespace)
	if planErr == nil && parent == nil {
		planErr = fmt.Errorf("its parent %s %s is gone (or named longer than a label holds)", proxy.Type, describeName(proxy.Namespace, proxy.Name))
	}
	if planErr != nil {
		removed := proxyset.Parent{Type: proxy.Type, Namespace: proxy.Namespace, Name: proxy.Name, Role: l[proxyset.LabelProxyRole]}
		if removed.Names().Base != base {
			return false, "", fmt.Errorf("cannot hand it back (%w), and it is not named as a parent's proxy", planErr)
		}
		if err := p.deleteProxy(ctx, p.d.Backend, removed); err != nil {
			return false, "", err
		}
		if err := p.releaseRemoved(ctx, parent, proxy.Type); err != nil {
			return false, "", err
		}
		p.d.Log.Warn("removed a proxy the official operator cannot take over, with its devices", "proxy", base, "why", planErr)
		return false, planErr.Error(), nil
	}
	configs := []string{proxyset.Names{Base: base}.LegacyConfigSecret()}
	for _, r := range plan.Replicas {
		configs = append(configs, r.From+"-config")
	}
	if err := p.stopOrKeep(ctx, base, parentLabels, configs); err != nil {
		return false, "", err
	}
	if plan.Headless != nil {
		_, err := p.d.Kube.CoreV1().Services(p.d.Settings.Namespace).Create(ctx, plan.Headless, metav1.CreateOptions{FieldManager: adoptionManager})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return false, "", fmt.Errorf("create the official headless Service %s: %w", plan.Headless.Name, err)
		}
	}
	var devices []string
	for _, r := range plan.Replicas {
		if err := p.writeHandedBack(ctx, r); err != nil {
			return false, "", err
		}
		dev, _ := proxyset.DeviceFromState(r.State)
		devices = append(devices, adoption.Replica{State: r.State, Device: dev}.Describe())
	}
	msg := "left device " + strings.Join(devices, "; ") + " for the official operator"
	p.d.Log.Info("handed a proxy back to the official operator", "proxy", base, "parent", describeName(proxy.Namespace, proxy.Name), "devices", strings.Join(devices, "; "))
	p.d.Post(parent, corev1.EventTypeNormal, ReasonHandedBack, msg)
	return true, strings.Join(devices, "; "), nil
}

// releaseRemoved takes Tailplane's finalizers off the parent (nil: gone)
// of a proxy the hand-back deleted: the official operator does not serve
// it, so no one else would, and deleting it would hang.
func (p *Pipeline) releaseRemoved(ctx context.Context, parent *unstructured.Unstructured, typ string) error {
	if parent == nil {
		return nil
	}
	kept := slices.DeleteFunc(slices.Clone(parent.GetFinalizers()), func(f string) bool {
		return f == proxystate.Finalizer || strings.HasPrefix(f, "tailplane.dev/")
	})
	if len(kept) == len(parent.GetFinalizers()) {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"finalizers": kept, "resourceVersion": parent.GetResourceVersion()}})
	if err != nil {
		return err
	}
	gvr, _ := parentResource(typ)
	if _, err := p.d.Dyn.Resource(gvr).Namespace(parent.GetNamespace()).Patch(ctx, parent.GetName(), types.MergePatchType, patch, metav1.PatchOptions{}); ignoreNotFound(err) != nil {
		return fmt.Errorf("remove Tailplane's finalizers from %s %s: %w", typ, describeName(parent.GetNamespace(), parent.GetName()), err)
	}
	return nil
}

// parentResource is the resource of the parents of type typ a hand-back
// reads.
func parentResource(typ string) (schema.GroupVersionResource, bool) {
	switch typ {
	case proxyset.ParentService:
		return resources.Services, true
	case proxyset.ParentIngress:
		return resources.Ingresses, true
	case "connector":
		return resources.Connectors, true
	case adoptionTypeProxyGroup:
		return resources.ProxyGroups, true
	case "gateway":
		return resources.Gateways, true
	}
	return schema.GroupVersionResource{}, false
}

// adoptionTypeProxyGroup is a ProxyGroup's parent type label.
const adoptionTypeProxyGroup = "proxygroup"

// handBackParent reads the parent of a proxy, nil when it is gone.
func (p *Pipeline) handBackParent(ctx context.Context, typ, namespace, name string) (*unstructured.Unstructured, error) {
	gvr, ok := parentResource(typ)
	if !ok {
		return nil, nil
	}
	obj, err := p.d.Dyn.Resource(gvr).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s %s: %w", gvr.Resource, describeName(namespace, name), err)
	}
	return obj, nil
}

// describeName is "namespace/name", or name for a cluster-scoped object.
func describeName(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

func ptrTo[T any](v T) *T { return &v }
