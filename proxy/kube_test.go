package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/tailplane/tailplane/internal/kubestate"
	"github.com/tailplane/tailplane/internal/proxystate"
	"github.com/tailplane/tailplane/internal/tailnettest"
	"github.com/tailplane/tailplane/internal/testpoll"
	"github.com/tailplane/tailplane/proxy/config"
	"github.com/tailplane/tailplane/proxy/configwatch"
)

func putConfig(t *testing.T, cs kubernetes.Interface, ns, name string, doc []byte) {
	t.Helper()
	ctx := context.Background()
	sec, err := cs.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		sec = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: map[string][]byte{config.SecretKey: doc}}
		if _, err := cs.CoreV1().Secrets(ns).Create(ctx, sec, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		return
	}
	sec.Data[config.SecretKey] = doc
	if _, err := cs.CoreV1().Secrets(ns).Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func stateKey(t *testing.T, cs kubernetes.Interface, ns, name, key string) (string, bool) {
	sec, err := cs.CoreV1().Secrets(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v, ok := sec.Data[key]
	return string(v), ok
}

// The config comes from a Secret watched through the API: changes apply in
// under 2 s without restart; a bad config is refused with a precise
// config_error while the previous one keeps serving; device info lands in
// the state Secret; TLS comes from a kubernetes.io/tls Secret; a restarted
// proxy is the same device.
func TestSecretConfigAndState(t *testing.T) {
	ns := env.Namespace(t)
	cs := env.Clientset(t)
	ctx := context.Background()
	tn := tailnettest.New(t, tailnettest.WithAuthKey("tskey-kube"))
	cert := newTestCert(t, "app.example.com")
	_, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "app-tls"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: cert.certPEM, corev1.TLSPrivateKeyKey: cert.keyPEM}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a, b := echoBackend(t, "a"), echoBackend(t, "b")
	cfg := newConfig(tn, "kube-proxy", config.RoleIngressL7)
	ba := backendOf("a", a)
	cfg.L7 = &config.L7{TLS: config.TLS{Mode: config.TLSSecret, SecretName: "app-tls"}, DefaultBackend: &ba}
	// As with the official operator, one Secret is both config and state.
	putConfig(t, cs, ns, "kube-proxy-0", mustJSON(t, cfg))

	startWithSecret := func() *running {
		st, err := kubestate.New(ctx, cs, ns, "kube-proxy-0")
		if err != nil {
			t.Fatal(err)
		}
		src := &configwatch.Secret{Client: cs, Namespace: ns, Name: "kube-proxy-0", Key: config.SecretKey, Log: testLogger(t)}
		return start(t, tn, nil, Options{Source: src, State: st, Status: st, Kube: cs, Namespace: ns, TLSRefreshInterval: 100 * time.Millisecond})
	}
	r := startWithSecret()
	c := r.httpsClient(cert.roots)
	backendIs := func(want string) func() error {
		return func() error {
			resp, body, err := get(c, "https://app.example.com/", nil)
			if err != nil {
				return err
			}
			if got := resp.Header.Get("X-Backend"); got != want {
				return fmt.Errorf("backend %q (status %d, %q), want %q", got, resp.StatusCode, body, want)
			}
			return nil
		}
	}
	testpoll.Until(t, 20*time.Second, "served by a", backendIs("a"))

	// Device info, with containerboot's key names and formats.
	var deviceID string
	testpoll.Until(t, 20*time.Second, "device info", func() error {
		id, ok1 := stateKey(t, cs, ns, "kube-proxy-0", proxystate.KeyDeviceID)
		fqdn, ok2 := stateKey(t, cs, ns, "kube-proxy-0", proxystate.KeyDeviceFQDN)
		ips, ok3 := stateKey(t, cs, ns, "kube-proxy-0", proxystate.KeyDeviceIPs)
		if !ok1 || !ok2 || !ok3 {
			return fmt.Errorf("keys missing")
		}
		var list []string
		ip4, _ := r.engine.Node().TailscaleIPs()
		if err := json.Unmarshal([]byte(ips), &list); err != nil || !slices.Contains(list, ip4.String()) {
			return fmt.Errorf("device_ips %q lacks %s", ips, ip4)
		}
		if fqdn != tailnettest.FQDN("kube-proxy")+"." {
			return fmt.Errorf("device_fqdn %q", fqdn)
		}
		deviceID = id
		return nil
	})
	if _, ok := stateKey(t, cs, ns, "kube-proxy-0", "_machinekey"); !ok {
		t.Error("tailscaled state (_machinekey) not in the state Secret")
	}

	// A change applies within 2 s, without restart.
	bb := backendOf("b", b)
	cfg.L7.DefaultBackend = &bb
	changed := time.Now()
	putConfig(t, cs, ns, "kube-proxy-0", mustJSON(t, cfg))
	testpoll.Until(t, 2*time.Second, "served by b within 2s", backendIs("b"))
	t.Logf("config change applied in %v", time.Since(changed))

	// Bad configs are refused precisely; b keeps serving.
	refusals := []struct {
		doc  []byte
		want string
	}{
		{[]byte(strings.Replace(string(mustJSON(t, cfg)), config.Version, "v9", 1)), `version: unknown config version "v9"`},
		{func() []byte { c := *cfg; l := *c.L7; l.TLS.SecretName = "nope"; c.L7 = &l; return mustJSON(t, &c) }(),
			fmt.Sprintf("l7.tls.secretName: TLS Secret %s/nope not found", ns)},
		{func() []byte { c := *cfg; c.AllowedSourceRanges = []string{"10.0.0.0/40"}; return mustJSON(t, &c) }(), `allowedSourceRanges[0]: bad CIDR "10.0.0.0/40"`},
		{func() []byte { c := *cfg; c.LoginServer = "http://127.0.0.1:1"; return mustJSON(t, &c) }(), `loginServer: cannot change from`},
	}
	for _, ref := range refusals {
		putConfig(t, cs, ns, "kube-proxy-0", ref.doc)
		testpoll.Until(t, 5*time.Second, "config_error "+ref.want, func() error {
			msg, _ := stateKey(t, cs, ns, "kube-proxy-0", proxystate.KeyConfigError)
			if !strings.Contains(msg, ref.want) {
				return fmt.Errorf("config_error %q", msg)
			}
			return nil
		})
		if err := backendIs("b")(); err != nil {
			t.Fatalf("after refused config: %v", err)
		}
	}
	// A TLS Secret created after the config that names it: refused first,
	// then applied by the retry without any config change.
	later := *cfg
	laterL7 := *cfg.L7
	laterL7.TLS.SecretName = "later-tls"
	later.L7 = &laterL7
	putConfig(t, cs, ns, "kube-proxy-0", mustJSON(t, &later))
	testpoll.Until(t, 5*time.Second, "later-tls refused", func() error {
		msg, _ := stateKey(t, cs, ns, "kube-proxy-0", proxystate.KeyConfigError)
		if !strings.Contains(msg, "later-tls not found") {
			return fmt.Errorf("config_error %q", msg)
		}
		return nil
	})
	_, err = cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "later-tls"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: cert.certPEM, corev1.TLSPrivateKeyKey: cert.keyPEM}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	testpoll.Until(t, 10*time.Second, "retry applies once the TLS Secret exists", func() error {
		if msg, ok := stateKey(t, cs, ns, "kube-proxy-0", proxystate.KeyConfigError); ok {
			return fmt.Errorf("config_error still %q", msg)
		}
		return nil
	})

	// A good config clears config_error.
	putConfig(t, cs, ns, "kube-proxy-0", mustJSON(t, cfg))
	testpoll.Until(t, 5*time.Second, "config_error cleared", func() error {
		if msg, ok := stateKey(t, cs, ns, "kube-proxy-0", proxystate.KeyConfigError); ok {
			return fmt.Errorf("config_error still %q", msg)
		}
		return nil
	})

	// Restart: same state Secret, same device.
	r.cancel()
	select {
	case <-r.done:
	case <-time.After(30 * time.Second):
		t.Fatal("engine did not stop")
	}
	r2 := startWithSecret()
	lc, _ := r2.engine.Node().LocalClient()
	st, err := lc.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if string(st.Self.ID) != deviceID {
		t.Errorf("restarted proxy is device %q, want %q", st.Self.ID, deviceID)
	}
	if resp, _, err := get(r2.httpsClient(cert.roots), "https://app.example.com/", nil); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("after restart: %v %v", err, resp)
	}

	// A renewed certificate in the TLS Secret is served without a config change.
	renewed := newTestCert(t, "app.example.com")
	sec, err := cs.CoreV1().Secrets(ns).Get(ctx, "app-tls", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sec.Data[corev1.TLSCertKey], sec.Data[corev1.TLSPrivateKeyKey] = renewed.certPEM, renewed.keyPEM
	if _, err := cs.CoreV1().Secrets(ns).Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	renewedClient := r2.httpsClient(renewed.roots)
	testpoll.Until(t, 10*time.Second, "renewed certificate served", func() error {
		_, _, err := get(renewedClient, "https://app.example.com/", nil)
		return err
	})
}

// A first config whose auth key control rejects is refused with a precise
// config_error and the proxy stays up (not ready); the next config with a
// good key logs in and clears the error.
func TestBadAuthKeyThenGoodKey(t *testing.T) {
	ns := env.Namespace(t)
	cs := env.Clientset(t)
	ctx := context.Background()
	tn := tailnettest.New(t, tailnettest.WithAuthKey("tskey-good"))
	backend := echoBackend(t, "a")
	cfg := newConfig(tn, "auth-proxy", config.RoleIngressL7)
	cfg.AuthKey = "tskey-wrong"
	b := backendOf("a", backend)
	cfg.L7 = &config.L7{PlainHTTP: true, DefaultBackend: &b}
	putConfig(t, cs, ns, "auth-proxy-0", mustJSON(t, cfg))
	st, err := kubestate.New(ctx, cs, ns, "auth-proxy-0")
	if err != nil {
		t.Fatal(err)
	}
	src := &configwatch.Secret{Client: cs, Namespace: ns, Name: "auth-proxy-0", Key: config.SecretKey, Log: testLogger(t)}
	r := startEngine(t, tn, nil, Options{Source: src, State: st, Status: st, Kube: cs, Namespace: ns, LocalAddr: "127.0.0.1:0"})
	testpoll.Until(t, 60*time.Second, "login refusal in config_error", func() error {
		msg, _ := stateKey(t, cs, ns, "auth-proxy-0", proxystate.KeyConfigError)
		if !strings.Contains(msg, `tailnet login as "auth-proxy" failed`) {
			return fmt.Errorf("config_error %q", msg)
		}
		return nil
	})
	if r.engine.Ready() {
		t.Fatal("ready without a login")
	}
	resp, err := http.Get("http://" + r.engine.LocalAddr() + "/healthz")
	if err != nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("/healthz before login: %v %v, want 503", err, resp)
	}
	resp.Body.Close()
	cfg.AuthKey = "tskey-good"
	putConfig(t, cs, ns, "auth-proxy-0", mustJSON(t, cfg))
	testpoll.Until(t, 60*time.Second, "ready with the good key", func() error {
		if !r.engine.Ready() {
			return fmt.Errorf("not ready")
		}
		if msg, ok := stateKey(t, cs, ns, "auth-proxy-0", proxystate.KeyConfigError); ok {
			return fmt.Errorf("config_error still %q", msg)
		}
		return nil
	})
}
