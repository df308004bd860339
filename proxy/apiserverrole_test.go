package proxy

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"tailscale.com/tailcfg"
	"tailscale.com/tsnet"

	"github.com/tailplane/tailplane/internal/kubestate"
	"github.com/tailplane/tailplane/internal/proxystate"
	"github.com/tailplane/tailplane/internal/tailnettest"
	"github.com/tailplane/tailplane/internal/testpoll"
	"github.com/tailplane/tailplane/proxy/config"
)

// Two replicas of a kube-apiserver ProxyGroup host svc:k8s-api like an
// ingress group's service: the issuing replica writes the shared
// certificate, the other one advertises once it can serve it and reports
// the service in its state Secret; a kubectl-like client on the tailnet
// reaching the service's address is the API server's caller: in mode auth
// its tailnet login, with the groups of its Kubernetes capability (RBAC
// decides), never the proxy's credentials; switched to noauth on a live
// replica, the caller's own token authenticates it.
func TestKubeAPIServerGroup(t *testing.T) {
	ns, other := env.Namespace(t), env.Namespace(t)
	cs := env.Clientset(t)
	ctx := context.Background()
	tn := tailnettest.New(t)
	domain := tailnettest.FQDN("k8s-api")
	_, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "k8s-api-tls"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: nil, corev1.TLSPrivateKeyKey: nil}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	apiCfg := func(hostname string, mode config.APIServerMode, issue bool) *config.Config {
		cfg := newConfig(tn, hostname, config.RoleKubeAPIServer)
		cfg.APIServer = &config.APIServer{Mode: mode, ServiceName: "svc:k8s-api",
			TLS: config.TLS{Mode: config.TLSShared, SecretName: "k8s-api-tls", Issue: issue}}
		return cfg
	}
	upstream := env.Config(t) // the proxy's own credentials: cluster admin
	ca := newTestCA(t)
	startEngine(t, tn, apiCfg("api-0", config.APIServerAuth, true), Options{Kube: cs, Namespace: ns, APIServerUpstream: upstream,
		IssueCert: func(_ context.Context, d string) ([]byte, []byte, error) {
			if d != domain {
				return nil, nil, fmt.Errorf("asked for %q, want %q", d, domain)
			}
			crt, key, _, err := ca.issue(d, 90*24*time.Hour)
			return crt, key, err
		}})
	state, err := kubestate.New(ctx, cs, ns, "api-1")
	if err != nil {
		t.Fatal(err)
	}
	r1 := start(t, tn, apiCfg("api-1", config.APIServerAuth, false), Options{State: state, Status: state, Kube: cs, Namespace: ns, APIServerUpstream: upstream})
	waitServices(t, r1.engine.Node(), "svc:k8s-api")
	testpoll.Until(t, 10*time.Second, "api-1 reports svc:k8s-api advertised", func() error {
		rep, err := serviceReport(ctx, cs, ns, "api-1")
		if err != nil {
			return err
		}
		if rep["svc:k8s-api"] != (proxystate.ServiceReport{Advertised: true}) {
			return fmt.Errorf("report %+v", rep)
		}
		return nil
	})
	addrs := vipAddrs(9)
	hostServices(t, tn, r1.engine.Node(), map[string][]netip.Addr{"svc:k8s-api": addrs})

	caller := r1.client
	login := callerLogin(t, caller)
	kube := apiClient(t, caller, netip.AddrPortFrom(addrs[0], 443), domain, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw}), "")
	testpoll.Until(t, 30*time.Second, "the API server sees the tailnet caller through svc:k8s-api", func() error {
		who, err := kube.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		if u := who.Status.UserInfo; u.Username != login || slices.Contains(u.Groups, "system:masters") {
			return fmt.Errorf("the API server sees %+v, want %s", u, login)
		}
		return nil
	})
	if _, err := kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("list configmaps without a grant: %v, want Forbidden (the proxy's own rights must not leak)", err)
	}

	// The tailnet grants the group; RBAC binds it in ns only.
	bindGroup(t, cs, ns, "tailnet-readers")
	rule, _ := json.Marshal(map[string]any{"impersonate": map[string]any{"groups": []string{"tailnet-readers"}}})
	tn.Control.SetGlobalAppCaps(tailcfg.PeerCapMap{tailcfg.PeerCapabilityKubernetes: {tailcfg.RawMessage(rule)}})
	testpoll.Until(t, 30*time.Second, "the granted group lists configmaps in ns", func() error {
		_, err := kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		return err
	})
	if _, err := kube.CoreV1().ConfigMaps(other).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("list configmaps where the group is not bound: %v, want Forbidden", err)
	}
	// A watch streams its events through the replica as they happen.
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	w, err := kube.CoreV1().ConfigMaps(ns).Watch(wctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "watched"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-w.ResultChan():
		if cm, ok := ev.Object.(*corev1.ConfigMap); !ok || cm.Name != "watched" {
			t.Fatalf("watch event %s %#v, want the new configmap", ev.Type, ev.Object)
		}
	case <-wctx.Done():
		t.Fatal("no watch event through the replica")
	}
	w.Stop()

	// Mode noauth on the running replica: the caller's own token.
	sa, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "kubectl"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa.Name, &authnv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	writeConfig(t, r1.cfgPath, apiCfg("api-1", config.APIServerNoAuth, false))
	withToken := apiClient(t, caller, netip.AddrPortFrom(addrs[1], 443), domain, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw}), tr.Status.Token)
	testpoll.Until(t, 30*time.Second, "noauth: the API server sees the caller's service account", func() error {
		who, err := withToken.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		if want := "system:serviceaccount:" + ns + ":kubectl"; who.Status.UserInfo.Username != want {
			return fmt.Errorf("the API server sees %q, want %q", who.Status.UserInfo.Username, want)
		}
		return nil
	})
}

// apiClient is a Kubernetes client on the tailnet device from, reaching
// the API server proxy at addr (a Tailscale Service address) by name.
func apiClient(t *testing.T, from *tsnet.Server, addr netip.AddrPort, domain string, caPEM []byte, token string) kubernetes.Interface {
	t.Helper()
	kube, err := kubernetes.NewForConfig(&rest.Config{
		Host: "https://" + domain, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: caPEM},
		Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialOverTailnet(ctx, from, "tcp", addr)
		},
		Timeout: 10 * time.Second, QPS: -1,
	})
	if err != nil {
		t.Fatal(err)
	}
	return kube
}

// callerLogin is the tailnet login of a user device.
func callerLogin(t *testing.T, node *tsnet.Server) string {
	t.Helper()
	lc, err := node.LocalClient()
	if err != nil {
		t.Fatal(err)
	}
	st, err := lc.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if u, ok := st.User[st.Self.UserID]; ok && u.LoginName != "" {
		return u.LoginName
	}
	t.Fatal(errors.New("the caller has no login name"))
	return ""
}

// bindGroup lets group read configmaps in ns.
func bindGroup(t *testing.T, cs kubernetes.Interface, ns, group string) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: group},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}}}}
	if _, err := cs.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: group},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: group}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: group}}
	if _, err := cs.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
