package tailnet

import (
	"context"
	"fmt"
	"testing"
	"time"

	tsapi "tailscale.com/client/tailscale/v2"
	"tailscale.com/ipn/ipnstate"
	"tailscale.com/ipn/store/mem"
	"tailscale.com/tsnet"
)

// join starts an ephemeral tsnet node with a new pre-authorized key
// carrying tags.
func join(ctx context.Context, t *testing.T, tn *Tailnet, hostname string, tags ...string) *tsnet.Server {
	t.Helper()
	var req tsapi.CreateKeyRequest
	req.Capabilities.Devices.Create.Preauthorized = true
	req.Capabilities.Devices.Create.Ephemeral = true
	req.Capabilities.Devices.Create.Tags = tags
	k, err := client(t, tn, tn.ClientSecret).Keys().CreateAuthKey(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	s := &tsnet.Server{ControlURL: tn.URL, Hostname: hostname, AuthKey: k.Key, Ephemeral: true,
		Store: new(mem.Store), Dir: t.TempDir(), Logf: func(string, ...any) {}, UserLogf: func(string, ...any) {}}
	if _, err := s.Up(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// waitStatus polls node's status until ok accepts it.
func waitStatus(ctx context.Context, t *testing.T, node *tsnet.Server, what string, ok func(*ipnstate.Status) bool) *ipnstate.Status {
	t.Helper()
	lc, err := node.LocalClient()
	if err != nil {
		t.Fatal(err)
	}
	for {
		st, err := lc.Status(ctx)
		if err == nil && ok(st) {
			return st
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v (last status error %v)", what, ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func peerNamed(st *ipnstate.Status, host string) *ipnstate.PeerStatus {
	for _, p := range st.Peer {
		if p.HostName == host {
			return p
		}
	}
	return nil
}

// Tagged devices belong to the tagged-devices user as on Tailscale: peers
// see "tagged-devices", and the device itself sees its MagicDNS name as its
// login (what the official operator reads as a device's DNS name).
func TestTaggedDevicesBelongToTaggedDevices(t *testing.T) {
	tn := startForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tagged := join(ctx, t, tn, "tagged", "tag:k8s")
	person := join(ctx, t, tn, "person")

	st := waitStatus(ctx, t, person, "person sees the tagged peer", func(st *ipnstate.Status) bool {
		return peerNamed(st, "tagged") != nil
	})
	p := peerNamed(st, "tagged")
	if int64(p.UserID) != int64(taggedDevicesID) || st.User[p.UserID].LoginName != "tagged-devices" {
		t.Fatalf("the tagged peer belongs to %d %+v, want tagged-devices", p.UserID, st.User[p.UserID])
	}
	if got := st.User[st.Self.UserID].LoginName; got != "devcluster@test.ts.net" {
		t.Fatalf("an untagged device belongs to %q, want devcluster@test.ts.net", got)
	}
	waitStatus(ctx, t, tagged, "the tagged device's own login is its MagicDNS name", func(st *ipnstate.Status) bool {
		return int64(st.Self.UserID) == int64(taggedDevicesID) && st.User[st.Self.UserID].LoginName == "tagged.test.ts.net"
	})
}

// A device deleted through the API leaves its peers' netmaps, and its node
// is logged out.
func TestDeletedDeviceLeavesPeers(t *testing.T) {
	tn := startForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	gone := join(ctx, t, tn, "gone")
	stays := join(ctx, t, tn, "stays")
	waitStatus(ctx, t, stays, "stays sees gone", func(st *ipnstate.Status) bool { return peerNamed(st, "gone") != nil })

	api := client(t, tn, tn.ClientSecret)
	devices, err := api.Devices().List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var id string
	for _, d := range devices {
		if d.Hostname == "gone" {
			id = d.NodeID
		}
	}
	if err := api.Devices().Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	waitStatus(ctx, t, stays, "gone leaves stays' netmap", func(st *ipnstate.Status) bool { return peerNamed(st, "gone") == nil })
	waitStatus(ctx, t, gone, "gone is logged out", func(st *ipnstate.Status) bool { return st.BackendState == "NeedsLogin" })
}

// An ephemeral device that logs out (devcluster curl's, when it is done)
// leaves the device list at once, as on Tailscale.
func TestEphemeralDeviceLeavesOnLogout(t *testing.T) {
	tn := startForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	node := join(ctx, t, tn, "curl")
	api := client(t, tn, tn.ClientSecret)
	listed := func() bool {
		devices, err := api.Devices().List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range devices {
			if d.Hostname == "curl" {
				return true
			}
		}
		return false
	}
	if !listed() {
		t.Fatal("the joined device is not listed")
	}
	lc, err := node.LocalClient()
	if err != nil {
		t.Fatal(err)
	}
	if err := lc.Logout(ctx); err != nil {
		t.Fatal(err)
	}
	if listed() {
		t.Fatal("the ephemeral device is still listed after it logged out")
	}
}

// Devices with the same hostname get name, name-1, name-2, as on
// Tailscale; each keeps its name while it exists.
func TestDuplicateHostnamesAreNumbered(t *testing.T) {
	tn := startForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var nodes []*tsnet.Server
	for range 3 {
		nodes = append(nodes, join(ctx, t, tn, "dup"))
	}
	for i, n := range nodes {
		want := "dup.test.ts.net."
		if i > 0 {
			want = fmt.Sprintf("dup-%d.test.ts.net.", i)
		}
		waitStatus(ctx, t, n, "node "+fmt.Sprint(i)+" is "+want, func(st *ipnstate.Status) bool { return st.Self.DNSName == want })
	}
	devices, err := client(t, tn, tn.ClientSecret).Devices().List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, d := range devices {
		names[d.Name] = true
	}
	if len(names) != 3 {
		t.Fatalf("device names %v, want three different ones", names)
	}
}
