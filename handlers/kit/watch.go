package kit

import (
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/tailplane/tailplane/internal/proxystate"
	"github.com/tailplane/tailplane/runtime"
)

// WatchProxyState re-handles a parent whenever its proxy's state Secret
// changes (the proxy wrote device_id, device_fqdn or device_ips), and
// indexes the state Secrets by role (HasProxy): the watch covers only
// managed state Secrets in the operator namespace.
func (d *Deps) WatchProxyState() {
	sel := stateSelector()
	d.indexProxies(sel)
	d.Op.Watch(Secrets, "proxy-state", func(typ watch.EventType, old, obj *unstructured.Unstructured) []runtime.Key {
		l := obj.GetLabels()
		res, ok := parentResource(l[proxystate.LabelParentType])
		if !ok || l[proxystate.LabelParentName] == "" || !stateChanged(typ, old, obj) {
			return nil
		}
		return []runtime.Key{{Resource: res, Namespace: l[proxystate.LabelParentNamespace], Name: l[proxystate.LabelParentName]}}
	}, runtime.Namespace(d.Settings.Namespace), runtime.Selector(sel))
}

// stateKeys are the keys of a state Secret the operator acts on; tailscaled's
// own keys change often and matter to nobody else.
var stateKeys = []string{proxystate.KeyDeviceID, proxystate.KeyDeviceFQDN, proxystate.KeyDeviceIPs, proxystate.KeyConfigError}

// stateChanged reports whether the operator-relevant keys of a state Secret
// changed: on an update, from the old state; when it appears (created, or
// listed after a restart), whether it has any. A new Secret without them
// (the operator just created it) and a deleted one are no news.
func stateChanged(typ watch.EventType, old, obj *unstructured.Unstructured) bool {
	switch typ {
	case watch.Deleted:
		return false
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
