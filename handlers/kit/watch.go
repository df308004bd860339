package kit

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/tailplane/tailplane/handlers/proxyset"
	"github.com/tailplane/tailplane/runtime"
)

// WatchProxyState re-handles a parent whenever its proxy's state Secret
// changes (the proxy wrote device_id, device_fqdn or device_ips): the watch
// covers only managed state Secrets in the operator namespace.
func (d *Deps) WatchProxyState() {
	sel := labels.SelectorFromSet(labels.Set{proxyset.LabelManaged: "true", proxyset.LabelSecretType: proxyset.SecretTypeState}).String()
	d.Op.OnEvent(Secrets, "proxy-state", func(_ context.Context, _ watch.EventType, obj *unstructured.Unstructured) error {
		l := obj.GetLabels()
		if l[proxyset.LabelParentType] != "" && l[proxyset.LabelParentName] != "" {
			d.Resync(l[proxyset.LabelParentType], l[proxyset.LabelParentNamespace], l[proxyset.LabelParentName])
		}
		return nil
	}, runtime.Namespace(d.Settings.Namespace), runtime.Selector(sel))
}
