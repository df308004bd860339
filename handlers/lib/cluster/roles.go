package cluster

import (
	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/runtime"
)

// The roles of proxies, the values of LabelProxyRole: what a parent's proxy
// does. Exposed and egress Services share the parent type "svc", so the
// role is what tells whose proxy a Service has.
const (
	RoleIngressL4 = "ingress-l4"
	RoleIngressL7 = "ingress-l7"
	RoleEgress    = "egress"
	RoleConnector = "connector"
	// RoleProxyGroup is the role of a ProxyGroup's replicas (every type).
	RoleProxyGroup = "proxygroup"
)

// LabelProxyRole is proxyset.LabelProxyRole.
const LabelProxyRole = proxyset.LabelProxyRole

// StateStorageName names the ConfigMaps (in the operator namespace) that
// keep the runtime's state of Services, Ingresses and IngressClasses.
const StateStorageName = "tailplane-state"

// StateStorageSelector selects the state ConfigMaps (their storage label
// is the runtime's, under the store's prefix).
const StateStorageSelector = "tailplane.dev/storage=" + StateStorageName

// StateStore is the option that keeps the runtime's state of a resource in
// ConfigMaps of the operator namespace (StateStorageName) instead of on the
// objects: for the users' objects and those the operator only reads.
func (d *Deps) StateStore() runtime.Option { return runtime.Store(d.stateStore) }

// ForUsersObjects returns opts plus the watch-namespace option and
// StateStore.
func (d *Deps) ForUsersObjects(opts ...runtime.Option) []runtime.Option {
	return d.Scope(append(opts, d.StateStore())...)
}

// LegacyStatePrefix is the prefix of the annotations the release before
// state ConfigMaps kept the runtime's records in (the runtime's default
// Settings.Prefix): ConfigMapStorage.Legacy.
const LegacyStatePrefix = "runtime.tailplane.io"
