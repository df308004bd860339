package tailnet

import (
	"fmt"
	"net/http"
	"reflect"
	"sync"
	"unsafe"

	"tailscale.com/tailcfg"
	"tailscale.com/tstest/integration/testcontrol"
	"tailscale.com/types/key"
)

// controlFields are the testcontrol.Server fields devcluster needs and
// testcontrol exports no API for: its keys (to keep them across restarts),
// its node, user and login tables (to restore nodes, give them owners and
// delete them), and the mutex guarding them. They are reached by
// reflection once, with each field's type checked, so that a tailscale.com
// upgrade that changes them fails at Start with a clear message instead of
// corrupting memory.
type controlFields struct {
	mu        *sync.Mutex
	mux       **http.ServeMux
	noisePriv *key.MachinePrivate
	noisePub  *key.MachinePublic
	legacy    *key.ControlPrivate
	legacyPub *key.MachinePublic
	nodes     *map[key.NodePublic]*tailcfg.Node
	users     *map[key.NodePublic]*tailcfg.User
	logins    *map[key.NodePublic]*tailcfg.Login
}

func reachControl(s *testcontrol.Server) (*controlFields, error) {
	f := &controlFields{}
	var err error
	set := func(dst any, name string) {
		if err == nil {
			err = fieldOf(s, name, dst)
		}
	}
	set(&f.mu, "mu")
	set(&f.mux, "mux")
	set(&f.noisePriv, "noisePrivKey")
	set(&f.noisePub, "noisePubKey")
	set(&f.legacy, "privKey")
	set(&f.legacyPub, "pubKey")
	set(&f.nodes, "nodes")
	set(&f.users, "users")
	set(&f.logins, "logins")
	return f, err
}

// fieldOf points *dst (a **T) at s's unexported field name of type T.
func fieldOf(s *testcontrol.Server, name string, dst any) error {
	d := reflect.ValueOf(dst).Elem() // the *T to set
	v := reflect.ValueOf(s).Elem().FieldByName(name)
	if !v.IsValid() || v.Type() != d.Type().Elem() {
		return fmt.Errorf("tailnet: testcontrol.Server has no field %s of type %s; update internals.go for this tailscale.com version", name, d.Type().Elem())
	}
	d.Set(reflect.NewAt(v.Type(), unsafe.Pointer(v.UnsafeAddr())))
	return nil
}

// setKeys installs the control server's keys; before anything is served,
// so /ts2021 never sees a zero key (testcontrol creates its keys lazily on
// the first /key, and panics on a Noise upgrade that comes first).
func (f *controlFields) setKeys(noise key.MachinePrivate, legacy key.ControlPrivate) {
	f.mu.Lock()
	defer f.mu.Unlock()
	*f.noisePriv, *f.noisePub = noise, noise.Public()
	*f.legacy, *f.legacyPub = legacy, legacy.Public()
}

// put adds or replaces node n with its owner, without waking anyone: for
// restoring nodes before the server serves, and for owners set at
// registration.
func (f *controlFields) put(n *tailcfg.Node, u *tailcfg.User, l *tailcfg.Login) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if *f.nodes == nil {
		*f.nodes = map[key.NodePublic]*tailcfg.Node{}
	}
	(*f.nodes)[n.Key] = n.Clone()
	f.setOwnerLocked(n.Key, u, l)
}

// setOwner records who owns the node with key k (or will, once it
// registers: testcontrol takes a node's user from this table if present).
func (f *controlFields) setOwner(k key.NodePublic, u *tailcfg.User, l *tailcfg.Login) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.setOwnerLocked(k, u, l)
}

func (f *controlFields) setOwnerLocked(k key.NodePublic, u *tailcfg.User, l *tailcfg.Login) {
	if *f.users == nil {
		*f.users = map[key.NodePublic]*tailcfg.User{}
	}
	if *f.logins == nil {
		*f.logins = map[key.NodePublic]*tailcfg.Login{}
	}
	(*f.users)[k], (*f.logins)[k] = u, l
}

// remove deletes the node with key k and its owner entry.
func (f *controlFields) remove(k key.NodePublic) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(*f.nodes, k)
	delete(*f.users, k)
	delete(*f.logins, k)
}
