package device_test

import (
	"context"
	"maps"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/tailplane/tailplane/handlers/lib/device"
	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/internal/proxystate"
	"github.com/tailplane/tailplane/internal/tailnet"
)

const ns = "tailplane"

// recorder is a workload that is no tailplane-proxy: its config Secret
// holds the auth key under "authkey", in its own format.
var recorder = proxyset.Parent{Type: "recorder", Namespace: "", Name: "rec", Role: "recorder"}

func secret(parent proxyset.Parent, name, typ string, data map[string]string) *corev1.Secret {
	l := parent.Labels()
	l[proxystate.LabelSecretType] = typ
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: l}, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

func state(parent proxyset.Parent, ordinal int, deviceID string) *corev1.Secret {
	data := map[string]string{}
	if deviceID != "" {
		data[proxystate.KeyDeviceID] = deviceID
	}
	return secret(parent, parent.Names().Replica(ordinal).StateSecret, proxyset.SecretTypeState, data)
}

func config(parent proxyset.Parent, ordinal int, key string) *corev1.Secret {
	return secret(parent, parent.Names().Replica(ordinal).ConfigSecret, proxyset.SecretTypeConfig, map[string]string{"authkey": key})
}

func newDevices(objs ...runtime.Object) (*device.Devices, *int) {
	kube := fake.NewClientset(objs...)
	lists := new(int)
	kube.PrependReactor("list", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		*lists++
		return false, nil, nil
	})
	return &device.Devices{Kube: kube, Namespace: ns, Log: quiet(), Kind: "recorder",
		KeyInConfig: func(s *corev1.Secret) string { return string(s.Data["authkey"]) }}, lists
}

// Group sorts Secrets into the wanted replicas and the extra ones, keeps
// the earlier release's single config apart, and leaves out what is no
// replica's (another workload of the parent, a TLS copy).
func TestGroupSortsReplicas(t *testing.T) {
	names := recorder.Names()
	other := recorder
	other.NameKey = "other"
	secrets := []*corev1.Secret{
		state(recorder, 2, "n2"), config(recorder, 0, "k0"), state(recorder, 0, "n0"), state(recorder, 3, ""),
		secret(recorder, names.LegacyConfigSecret(), proxyset.SecretTypeConfig, nil),
		secret(recorder, names.Base+"-0-tls", "", nil), state(other, 0, "x"),
	}
	set := device.Group(recorder, 2, secrets)
	if len(set.Replicas) != 2 || set.Replicas[0].Config == nil || set.Replicas[0].Device.ID != "n0" || set.Replicas[1].State != nil {
		t.Errorf("wanted replicas %+v", set.Replicas)
	}
	var extra []int
	for _, r := range set.Extra {
		extra = append(extra, r.Names.Ordinal)
	}
	if !slices.Equal(extra, []int{2, 3}) || set.Extra[0].Device.ID != "n2" {
		t.Errorf("extra ordinals %v, want [2 3]", extra)
	}
	if set.LegacyConfig == nil || set.LegacyConfig.Name != names.LegacyConfigSecret() {
		t.Errorf("legacy config %v", set.LegacyConfig)
	}
	if n := len(set.All()); n != 4 {
		t.Errorf("All has %d replicas, want 4", n)
	}
}

// The cached state Secrets replace the List only once a read from the API
// server showed every replica logged in with a key-less config; a replica
// without a device (about to be handed a key) is read from the API server
// again, and so is a config that still carries a key.
func TestReadUsesTheCacheOnlyWhenNoKeyIsDecided(t *testing.T) {
	ctx := context.Background()
	objs := []runtime.Object{state(recorder, 0, "n0"), config(recorder, 0, ""), state(recorder, 1, "n1"), config(recorder, 1, "spent")}
	d, lists := newDevices(objs...)
	cached := []*corev1.Secret{state(recorder, 0, "n0"), state(recorder, 1, "n1")}

	read := func(cached []*corev1.Secret, wantLists int) *device.Set {
		t.Helper()
		set, err := d.Read(ctx, recorder, 2, cached)
		if err != nil {
			t.Fatal(err)
		}
		if *lists != wantLists {
			t.Fatalf("%d Lists, want %d", *lists, wantLists)
		}
		return set
	}
	read(cached, 1) // never read from the API server yet
	read(cached, 2) // replica 1's config still carries its (spent) key
	if err := d.Kube.CoreV1().Secrets(ns).Delete(ctx, config(recorder, 1, "").Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	read(cached, 3)
	set := read(cached, 3) // settled: the cache serves
	if set.Replicas[1].Device.ID != "n1" || set.Replicas[1].Config != nil {
		t.Errorf("cached replica 1: %+v", set.Replicas[1])
	}
	read(nil, 4)                                                                // no cache given
	read([]*corev1.Secret{state(recorder, 0, "n0"), state(recorder, 1, "")}, 5) // replica 1 lost its device
}

// A state Secret the role index cannot see (an earlier release's, without
// the role label) keeps every read on the API server.
func TestReadDoesNotSettleOnSecretsTheCacheMisses(t *testing.T) {
	unlabelled := state(recorder, 2, "n2")
	delete(unlabelled.Labels, proxyset.LabelProxyRole)
	d, lists := newDevices(state(recorder, 0, "n0"), unlabelled)
	for range 2 {
		if _, err := d.Read(context.Background(), recorder, 1, []*corev1.Secret{state(recorder, 0, "n0")}); err != nil {
			t.Fatal(err)
		}
	}
	if *lists != 2 {
		t.Errorf("%d Lists, want 2", *lists)
	}
}

// AuthKey hands over the key in the workload's own config, mints one
// described with the replica's name when there is none, and once the
// device logged in hands over none and revokes the replica's unused keys.
func TestAuthKeyDecision(t *testing.T) {
	ctx := context.Background()
	d, _ := newDevices()
	be := &fakeTailnet{}
	r0 := device.Replica{Names: recorder.Names().Replica(0)}
	desc := proxyset.KeyDescription(r0.Names.Base, 0)

	r0.Config = config(recorder, 0, "kept")
	if key, err := d.AuthKey(ctx, be, r0, []string{"tag:rec"}); err != nil || key != "kept" || len(be.minted) != 0 {
		t.Fatalf("with a key in the config: %q, %v, minted %v", key, err, be.minted)
	}
	r0.Config = config(recorder, 0, "")
	key, err := d.AuthKey(ctx, be, r0, []string{"tag:rec"})
	if err != nil || key == "" || len(be.minted) != 1 || be.minted[0].Description != desc || !slices.Equal(be.minted[0].Tags, []string{"tag:rec"}) {
		t.Fatalf("without a key: %q, %v, minted %+v", key, err, be.minted)
	}
	r0.Config, r0.Device.ID = config(recorder, 0, key), "n0"
	if key, err := d.AuthKey(ctx, be, r0, []string{"tag:rec"}); err != nil || key != "" {
		t.Fatalf("logged in: %q, %v", key, err)
	}
	if !slices.Equal(be.revoked, []string{"k1"}) {
		t.Errorf("revoked %v, want the minted key k1", be.revoked)
	}
}

// Remove deletes the devices, revokes every replica's unused keys, and
// deletes the set's Secrets, not another workload's of the same parent.
func TestRemoveDeletesDevicesKeysAndSecrets(t *testing.T) {
	ctx := context.Background()
	other := recorder
	other.NameKey = "other"
	d, _ := newDevices(state(recorder, 0, "n0"), config(recorder, 0, ""), state(recorder, 1, "n1"), state(other, 0, "x"))
	base := recorder.Names().Base
	be := &fakeTailnet{keys: []tailnet.AuthKey{{ID: "r1", Description: proxyset.KeyDescription(base, 1)},
		{ID: "legacy", Description: proxyset.KeyDescription(base, -1)}, {ID: "x", Description: proxyset.KeyDescription(other.Names().Base, 0)}}}
	if err := d.Remove(ctx, be, recorder); err != nil {
		t.Fatal(err)
	}
	slices.Sort(be.deleted)
	if !slices.Equal(be.deleted, []string{"n0", "n1"}) || !slices.Equal(be.revoked, []string{"r1", "legacy"}) {
		t.Errorf("deleted devices %v, revoked %v", be.deleted, be.revoked)
	}
	left, _ := d.Kube.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
	if len(left.Items) != 1 || left.Items[0].Name != other.Names().StateSecret {
		t.Errorf("left %v", slices.Collect(maps.Keys(namesOf(left.Items))))
	}
}

func namesOf(items []corev1.Secret) map[string]bool {
	out := map[string]bool{}
	for _, s := range items {
		out[s.Name] = true
	}
	return out
}
