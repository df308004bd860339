// Package kubestate keeps a tsnet node's tailscaled state (a proxy's, or the
// operator's own device's) in a Kubernetes Secret, in the same layout as
// tailscale's kubestore (one Secret key per state key, characters outside
// [A-Za-z0-9._-] replaced by '_'). For proxies it also writes the
// containerboot status keys the operator reads: device_id, device_fqdn,
// device_ips, pod_uid and config_error; and the proxy's own recent_peers,
// which the next process of the device reads back.
//
// It uses client-go (so it works with any kubeconfig, not only in-cluster
// service-account files) and implements tailscale's ipn.StateStore. Of
// ours it imports only internal/proxystate (the status keys' names).
package kubestate

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"tailscale.com/ipn"

	"github.com/tailplane/tailplane/internal/proxystate"
)

// FieldManager is the server-side field manager of the proxy's writes.
const FieldManager = "tailplane-proxy"

// writeTimeout bounds one API write.
const writeTimeout = 30 * time.Second

// Store is an ipn.StateStore backed by one Secret. Reads come from memory;
// writes go to the API first and to memory once they succeeded.
type Store struct {
	client    kubernetes.Interface
	namespace string
	name      string

	mu     sync.RWMutex
	data   map[string][]byte
	podUID string // set by SetPodUID
}

var _ ipn.StateStore = (*Store)(nil)

// New loads the Secret namespace/name, creating it empty when missing.
func New(ctx context.Context, client kubernetes.Interface, namespace, name string) (*Store, error) {
	s := &Store{client: client, namespace: namespace, name: name, data: map[string][]byte{}}
	secrets := client.CoreV1().Secrets(namespace)
	sec, err := secrets.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		sec, err = secrets.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}, metav1.CreateOptions{FieldManager: FieldManager})
		if apierrors.IsAlreadyExists(err) {
			sec, err = secrets.Get(ctx, name, metav1.GetOptions{})
		}
	}
	if err != nil {
		return nil, fmt.Errorf("load state Secret %s/%s: %w", namespace, name, err)
	}
	for k, v := range sec.Data {
		s.data[k] = v
	}
	return s, nil
}

// String names the store in tailscale's logs.
func (s *Store) String() string { return "kubestate:" + s.namespace + "/" + s.name }

var unsafeKeyChars = regexp.MustCompile(`[^A-Za-z0-9._-]`)

// sanitize maps a state key to a Secret key the way kubestore does.
func sanitize(k string) string { return unsafeKeyChars.ReplaceAllString(k, "_") }

// ReadState implements ipn.StateStore.
func (s *Store) ReadState(id ipn.StateKey) ([]byte, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	v, ok := s.data[sanitize(string(id))]
	if !ok {
		return nil, ipn.ErrStateNotExist
	}
	return v, nil
}

// WriteState implements ipn.StateStore.
func (s *Store) WriteState(id ipn.StateKey, bs []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	return s.Set(ctx, map[string][]byte{sanitize(string(id)): bs})
}

// Set merges keys into the Secret; a nil value deletes the key.
func (s *Store) Set(ctx context.Context, kv map[string][]byte) error {
	data := map[string]any{}
	for k, v := range kv {
		if v == nil {
			data[k] = nil
		} else {
			data[k] = v // []byte marshals as base64, as Secret data expects
		}
	}
	patch, err := json.Marshal(map[string]any{"data": data})
	if err != nil {
		return fmt.Errorf("encode state patch: %w", err)
	}
	_, err = s.client.CoreV1().Secrets(s.namespace).Patch(ctx, s.name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: FieldManager})
	if err != nil {
		return fmt.Errorf("write state Secret %s/%s: %w", s.namespace, s.name, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, v := range kv {
		if v == nil {
			delete(s.data, k)
		} else {
			s.data[k] = v
		}
	}
	return nil
}

// Get returns a key's current value as last written or loaded.
func (s *Store) Get(key string) ([]byte, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	v, ok := s.data[key]
	return v, ok
}

// DeviceInfo is what the operator reads back after login.
type DeviceInfo struct {
	// ID is the node's StableNodeID.
	ID string
	// FQDN is the MagicDNS name with its trailing dot, as containerboot writes it.
	FQDN string
	// IPs are the tailnet addresses.
	IPs []string
	// AdvertisedRoutes and ApprovedRoutes are the routes the node
	// advertises, and those of them control approved.
	AdvertisedRoutes, ApprovedRoutes []string
}

// SetDeviceInfo writes device_id, device_fqdn, device_ips and the routes
// (JSON arrays of strings) when any of them changed.
func (s *Store) SetDeviceInfo(ctx context.Context, d DeviceInfo) error {
	list := func(v []string) []byte {
		b, _ := json.Marshal(append([]string{}, v...)) // a list of strings always encodes
		return b
	}
	want := map[string][]byte{proxystate.KeyDeviceID: []byte(d.ID), proxystate.KeyDeviceFQDN: []byte(d.FQDN),
		proxystate.KeyDeviceIPs: list(d.IPs), proxystate.KeyDeviceAdvertisedRoutes: list(d.AdvertisedRoutes),
		proxystate.KeyDeviceApprovedRoutes: list(d.ApprovedRoutes)}
	if s.has(want) {
		return nil
	}
	return s.Set(ctx, want)
}

// SetConfigError records why the latest config was refused; "" clears it.
//
// A success ("") also records, under KeyConfigApplied, the Pod UID given to
// SetPodUID: the operator counts a replica as serving its config only once
// the running process applied it.
func (s *Store) SetConfigError(ctx context.Context, msg string) error {
	return s.setConfigStatus(ctx, msg, msg == "")
}

// SetConfigServing records that the running process applied its config
// (KeyConfigApplied), and problem ("" none) as KeyConfigError: what of the
// config does not serve, such as a listener that could not open.
func (s *Store) SetConfigServing(ctx context.Context, problem string) error {
	return s.setConfigStatus(ctx, problem, true)
}

func (s *Store) setConfigStatus(ctx context.Context, msg string, applied bool) error {
	var v []byte
	if msg != "" {
		v = []byte(msg)
	}
	kv := map[string][]byte{}
	if cur, ok := s.Get(proxystate.KeyConfigError); ok != (v != nil) || string(cur) != msg {
		kv[proxystate.KeyConfigError] = v
	}
	s.mu.RLock()
	uid := s.podUID
	s.mu.RUnlock()
	if cur, _ := s.Get(proxystate.KeyConfigApplied); applied && uid != "" && string(cur) != uid {
		kv[proxystate.KeyConfigApplied] = []byte(uid)
	}
	if len(kv) == 0 {
		return nil
	}
	return s.Set(ctx, kv)
}

// SetPodUID records the UID of the Pod this process runs in (KeyPodUID) at
// start, and clears KeyConfigApplied until this process applied its
// config.
func (s *Store) SetPodUID(ctx context.Context, uid string) error {
	s.mu.Lock()
	s.podUID = uid
	s.mu.Unlock()
	return s.Set(ctx, map[string][]byte{proxystate.KeyPodUID: []byte(uid), proxystate.KeyConfigApplied: nil})
}

// SetServices writes the Tailscale Services report (a JSON object by
// service name) when it changed.
func (s *Store) SetServices(ctx context.Context, report map[string]proxystate.ServiceReport) error {
	b, err := json.Marshal(report)
	if err != nil {
		return fmt.Errorf("encode %s: %w", proxystate.KeyServices, err)
	}
	want := map[string][]byte{proxystate.KeyServices: b}
	if s.has(want) {
		return nil
	}
	return s.Set(ctx, want)
}

func (s *Store) has(kv map[string][]byte) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for k, v := range kv {
		if cur, ok := s.data[k]; !ok || string(cur) != string(v) {
			return false
		}
	}
	return true
}

// SetRecentPeers writes the recent peers' tailnet addresses (a JSON list,
// proxystate.KeyRecentPeers) when they changed.
func (s *Store) SetRecentPeers(ctx context.Context, peers []string) error {
	b, err := json.Marshal(append([]string{}, peers...))
	if err != nil {
		return fmt.Errorf("encode %s: %w", proxystate.KeyRecentPeers, err)
	}
	want := map[string][]byte{proxystate.KeyRecentPeers: b}
	if s.has(want) {
		return nil
	}
	return s.Set(ctx, want)
}

// RecentPeers returns the addresses last recorded by SetRecentPeers, by
// this process or by the previous one of the device (read when the store
// was loaded); nil when there are none or the key does not parse.
func (s *Store) RecentPeers() []string {
	b, ok := s.Get(proxystate.KeyRecentPeers)
	if !ok {
		return nil
	}
	var peers []string
	if err := json.Unmarshal(b, &peers); err != nil {
		return nil
	}
	return peers
}
