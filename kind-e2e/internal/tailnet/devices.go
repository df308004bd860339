package tailnet

import (
	"net/netip"
	"sync"
	"time"

	"tailscale.com/types/key"
)

// deviceInfo is what devcluster keeps about a device beyond testcontrol's
// node: when and with which key it joined, whose it is, whether it was
// deleted, and its approved routes.
type deviceInfo struct {
	Created   time.Time
	Ephemeral bool
	KeyID     string
	Removed   bool
	// User is the login of the user the device belongs to when its key
	// was a user's (UserAuthKey); empty: the tailnet's owner.
	User string `json:",omitempty"`
	// ApprovedRoutes are the routes approved for the device (by an
	// auto-approver or through the API), advertised or not.
	ApprovedRoutes []netip.Prefix `json:",omitempty"`
}

type deviceRegistry struct {
	mu sync.Mutex
	m  map[key.NodePublic]deviceInfo
}

func (d *deviceRegistry) add(k key.NodePublic, i deviceInfo) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.m[k] = i
}

func (d *deviceRegistry) info(k key.NodePublic) deviceInfo {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.m[k]
}

// member reports whether k is a device of this registry and whether it
// was deleted.
func (d *deviceRegistry) member(k key.NodePublic) (in, removed bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	i, in := d.m[k]
	return in, i.Removed
}

func (d *deviceRegistry) has(k key.NodePublic) bool {
	in, _ := d.member(k)
	return in
}

func (d *deviceRegistry) removed(k key.NodePublic) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.m[k].Removed
}

func (d *deviceRegistry) setApproved(k key.NodePublic, routes []netip.Prefix) {
	d.mu.Lock()
	defer d.mu.Unlock()
	i := d.m[k]
	i.ApprovedRoutes = routes
	d.m[k] = i
}

func (d *deviceRegistry) remove(k key.NodePublic) {
	d.mu.Lock()
	defer d.mu.Unlock()
	i := d.m[k]
	i.Removed = true
	d.m[k] = i
}
