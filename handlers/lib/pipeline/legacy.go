package pipeline

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/runtime"
)

// LegacyMark is the annotation the release before roles put on a parent
// with a proxy, with the proxy's role as value; its state Secrets have no
// proxyset.LabelProxyRole. It is read once after an upgrade and then
// removed with the object's next patch (docs/operator.md, "Upgrading").
const LegacyMark = "tailplane.dev/proxy"

// syncLegacy runs the pipeline for a parent that may still carry
// LegacyMark. A parent that still asks for a proxy first has the mark's
// role put on its state Secret, so that the Secret keeps the parent's
// handlers from then on; the mark goes with the cycle's patch once the
// pipeline succeeded (for a released parent: once its proxy is gone).
func (p *Pipeline) syncLegacy(ctx context.Context, m *Module, ev *runtime.Event) error {
	obj := ev.Object
	legacy := obj.GetAnnotations()[LegacyMark] == m.Role
	if legacy && m.IsOurs(obj) {
		if err := p.labelLegacyState(ctx, m, obj); err != nil {
			return err
		}
	}
	if err := p.sync(ctx, m, obj); err != nil {
		return err
	}
	if legacy {
		ev.Patch.RemoveAnnotation(LegacyMark)
	}
	return nil
}

// labelLegacyState puts the role label on the parent's state Secret (as
// that release named it), if it has one without it.
func (p *Pipeline) labelLegacyState(ctx context.Context, m *Module, obj *unstructured.Unstructured) error {
	legacy := proxyset.Parent{Type: m.ParentType, NameKey: m.LegacyNameKey, Namespace: obj.GetNamespace(), Name: obj.GetName()}
	name := legacy.Names().StateSecret
	secrets := p.d.Kube.CoreV1().Secrets(p.d.Settings.Namespace)
	s, err := secrets.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read Secret %s: %w", name, err)
	}
	if s.Labels[proxyset.LabelProxyRole] != "" {
		return nil
	}
	body, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{proxyset.LabelProxyRole: m.Role}}})
	if _, err := secrets.Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("label state Secret %s/%s with its role: %w", p.d.Settings.Namespace, name, err)
	}
	return nil
}
