package kit

import (
	"context"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/tailplane/tailplane/handlers/proxyset"
	"github.com/tailplane/tailplane/runtime"
)

// WatchProxyState re-handles a parent whenever its proxy's state Secret
// changes (the proxy wrote device_id, device_fqdn or device_ips), and
// indexes the state Secrets by role (HasProxy): the watch covers only
// managed state Secrets in the operator namespace.
func (d *Deps) WatchProxyState() {
	sel := stateSelector()
	d.indexProxies(sel)
	d.Op.OnEvent(Secrets, "proxy-state", func(_ context.Context, typ watch.EventType, obj *unstructured.Unstructured) error {
		l := obj.GetLabels()
		if l[proxyset.LabelParentType] == "" || l[proxyset.LabelParentName] == "" || !d.stateChanged(typ, obj) {
			return nil
		}
		d.Resync(l[proxyset.LabelParentType], l[proxyset.LabelParentNamespace], l[proxyset.LabelParentName])
		return nil
	}, runtime.Namespace(d.Settings.Namespace), runtime.Selector(sel))
}

// stateKeys are the keys of a state Secret the operator acts on; tailscaled's
// own keys change often and matter to nobody else.
var stateKeys = []string{proxyset.KeyDeviceID, proxyset.KeyDeviceFQDN, proxyset.KeyDeviceIPs, KeyConfigError}

// stateChanged reports whether the operator-relevant keys of a state Secret
// differ from the last ones seen. A new Secret without them (the operator
// just created it) is no news.
func (d *Deps) stateChanged(typ watch.EventType, obj *unstructured.Unstructured) bool {
	data, _, _ := unstructured.NestedStringMap(obj.Object, "data")
	var b strings.Builder
	for _, k := range stateKeys {
		b.WriteString(data[k])
		b.WriteByte(0)
	}
	fp := b.String()
	key := obj.GetName()
	d.stateMu.Lock()
	defer d.stateMu.Unlock()
	if d.lastState == nil {
		d.lastState = map[string]string{}
	}
	if typ == watch.Deleted {
		delete(d.lastState, key)
		return false
	}
	prev, seen := d.lastState[key]
	d.lastState[key] = fp
	if !seen {
		return fp != strings.Repeat("\x00", len(stateKeys))
	}
	return prev != fp
}
