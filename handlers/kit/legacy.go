package kit

import (
	"context"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tailplane/tailplane/handlers/proxyset"
	"github.com/tailplane/tailplane/runtime"
)

// What the previous release wrote on the users' objects, read once after an
// upgrade and then removed with the object's next patch (docs/operator.md,
// "Upgrading").
const (
	// LegacyMark is the annotation that release put on a parent with a
	// proxy, with the proxy's role as value; its state Secrets have no
	// LabelProxyRole.
	LegacyMark = "tailplane.dev/proxy"
	// LegacyStatePrefix is the prefix of the annotations it kept the
	// runtime's records in (the runtime's default Settings.Prefix):
	// ConfigMapStorage.Legacy.
	LegacyStatePrefix = "runtime.tailplane.io"
)

// syncLegacy runs a ProxyParent's Sync for a parent that may still carry
// LegacyMark. A parent that still asks for a proxy first has the mark's
// role put on its state Secret, so that the Secret keeps the parent's
// handlers from then on; the mark goes with the cycle's patch once Sync
// succeeded (for a released parent: once its proxy is gone).
func (d *Deps) syncLegacy(ctx context.Context, p ProxyParent, ev *runtime.Event) error {
	obj := ev.Object
	legacy := obj.GetAnnotations()[LegacyMark] == p.Role
	if legacy && p.IsOurs(obj) {
		if err := d.labelLegacyState(ctx, p, obj); err != nil {
			return err
		}
	}
	if err := p.Sync(ctx, obj, ev.Patch); err != nil {
		return err
	}
	if legacy {
		ev.Patch.RemoveAnnotation(LegacyMark)
	}
	return nil
}

// labelLegacyState puts LabelProxyRole on the parent's state Secret, if it
// has one without it.
func (d *Deps) labelLegacyState(ctx context.Context, p ProxyParent, obj *unstructured.Unstructured) error {
	name := proxyset.NamesFor(p.Type, obj.GetNamespace(), obj.GetName()).StateSecret
	s, err := d.getSecret(ctx, name)
	if err != nil || s == nil || s.Labels[LabelProxyRole] != "" {
		return err
	}
	body, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{LabelProxyRole: p.Role}}})
	if _, err := d.Kube.CoreV1().Secrets(d.Settings.Namespace).Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("label state Secret %s/%s with its role: %w", d.Settings.Namespace, name, err)
	}
	return nil
}
