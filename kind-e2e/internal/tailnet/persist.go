package tailnet

import (
	"slices"

	"tailscale.com/tailcfg"
	"tailscale.com/types/key"
)

// controlState is what the control server must keep across restarts for
// running and resumed nodes to carry on: its keys (a new Noise key makes
// every client fail to reconnect until restarted) and its nodes (node
// keys, IDs, which give the tailnet IPs, names and tags).
type controlState struct {
	NoiseKey  key.MachinePrivate `json:"noiseKey"`
	LegacyKey key.ControlPrivate `json:"legacyKey"`
	Nodes     []savedNode        `json:"nodes"`
}

// savedNode is one node of the control server with its device record.
type savedNode struct {
	Node   *tailcfg.Node `json:"node"`
	Device deviceInfo    `json:"device"`
}

// controlKeys returns the control server's keys, creating and saving them
// on the first start.
func (s *store) controlKeys() (key.MachinePrivate, key.ControlPrivate, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := &s.Control
	if c.NoiseKey.IsZero() || c.LegacyKey.IsZero() {
		c.NoiseKey, c.LegacyKey = key.NewMachine(), key.NewControl()
		if err := s.saveLocked(); err != nil {
			return c.NoiseKey, c.LegacyKey, err
		}
	}
	return c.NoiseKey, c.LegacyKey, nil
}

// savedNodes returns the nodes saved by the last run.
func (s *store) savedNodes() []savedNode {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.Control.Nodes)
}

func (s *store) setNodes(nodes []savedNode) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Control.Nodes = nodes
	return s.saveLocked()
}

// restoreNodes puts the tailnet's saved nodes into the control server; it
// runs before the server serves anything.
func (t *Tailnet) restoreNodes() {
	for _, sn := range t.store.savedNodes() {
		if sn.Node == nil || sn.Node.Key.IsZero() {
			continue
		}
		// Saved by a tailnet with a control server of its own (devcluster
		// before its tailnets shared one), a node may have the ID of
		// another tailnet's: it gets a free one (new addresses).
		t.uniqueID(sn.Node)
		u, l := t.owner(sn.Node.Tags, sn.Device.User)
		sn.Node.User = u.ID
		t.fields.put(sn.Node, u, l)
		t.devices.add(sn.Node.Key, sn.Device)
	}
}

// saveNodes writes the control server's live nodes to the state file.
// Called after every change a restart must keep (registration, rename,
// tags, deletion) and at Close; endpoints and disco keys, which nodes
// resend on reconnecting, may be stale in it.
func (t *Tailnet) saveNodes() {
	t.saveMu.Lock()
	defer t.saveMu.Unlock()
	var out []savedNode
	for _, n := range t.liveNodes() {
		out = append(out, savedNode{Node: n, Device: t.devices.info(n.Key)})
	}
	if err := t.store.setNodes(out); err != nil {
		t.logger.Warn("save the tailnet's nodes", "err", err)
	}
}

// taggedDevicesID is the user that owns tagged devices, as on Tailscale,
// where a tagged device belongs to no person.
const taggedDevicesID tailcfg.UserID = 2147455555
