package apiserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"tailscale.com/client/tailscale/apitype"
	"tailscale.com/tailcfg"

	"github.com/tailplane/tailplane/internal/testpoll"
)

// grantGroups makes control grant every device the Kubernetes capability
// with these impersonation groups toward every other (nil: no grant).
func (f *fixture) grantGroups(groups ...string) {
	if groups == nil {
		f.tn.Control.SetGlobalAppCaps(nil)
		return
	}
	rule, _ := json.Marshal(map[string]any{"impersonate": map[string]any{"groups": groups}})
	f.tn.Control.SetGlobalAppCaps(tailcfg.PeerCapMap{tailcfg.PeerCapabilityKubernetes: {tailcfg.RawMessage(rule)}})
}

// In mode auth the API server sees the tailnet caller, never the proxy:
// a user device without a grant is its login name only, and RBAC refuses
// it what the proxy's admin credentials could do; with the capability's
// impersonation group it may do what the group's RoleBinding allows there
// and nothing elsewhere; credentials and Impersonate-* headers the client
// sends itself change nothing; a tagged device is its MagicDNS name, with
// its tags as groups until a rule grants groups. Watches stream through.
func TestAuthMode(t *testing.T) {
	ctx := context.Background()
	ns, other := env.Namespace(t), env.Namespace(t)
	admin := env.Clientset(t)
	f := newFixture(t, ModeAuth)
	alice := f.tn.Node(t, "alice")
	login := loginName(t, alice)
	asAlice := f.client(t, alice, "", rest.ImpersonationConfig{})
	grantRole(t, ns, "readers", rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "tailnet-readers"},
		[]string{"configmaps"}, "get", "list", "watch")

	t.Run("no grant: the caller itself, refused by RBAC", func(t *testing.T) {
		var who authnv1.UserInfo
		testpoll.Until(t, 30*time.Second, "SelfSubjectReview through the proxy", func() (err error) {
			who, err = whoami(ctx, asAlice)
			return err
		})
		if who.Username != login || slices.Contains(who.Groups, "tailnet-readers") || slices.Contains(who.Groups, "system:masters") {
			t.Fatalf("the API server sees %+v, want user %s without granted groups", who, login)
		}
		if _, err := asAlice.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
			t.Fatalf("list configmaps without a grant: %v, want Forbidden", err)
		}
	})

	robot := f.tn.Server(t, "robot")
	robot.AdvertiseTags = []string{"tag:ci"}
	upCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := robot.Up(upCtx); err != nil {
		t.Fatal(err)
	}
	asRobot := f.client(t, robot, "", rest.ImpersonationConfig{})
	t.Run("tagged device without a grant: its name, its tags as groups", func(t *testing.T) {
		testpoll.Until(t, 30*time.Second, "robot seen as its node with its tags", func() error {
			who, err := whoami(ctx, asRobot)
			if err != nil {
				return err
			}
			if who.Username != "robot.tail-test.ts.net" || !slices.Contains(who.Groups, "tag:ci") {
				return fmt.Errorf("the API server sees %+v", who)
			}
			return nil
		})
	})

	f.grantGroups("tailnet-readers")
	t.Run("granted group: allowed where bound, Forbidden elsewhere", func(t *testing.T) {
		testpoll.Until(t, 30*time.Second, "alice lists configmaps with the granted group", func() error {
			_, err := asAlice.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
			return err
		})
		who, err := whoami(ctx, asAlice)
		if err != nil || who.Username != login || !slices.Contains(who.Groups, "tailnet-readers") {
			t.Fatalf("the API server sees %+v (%v), want %s in tailnet-readers", who, err, login)
		}
		if _, err := asAlice.CoreV1().ConfigMaps(other).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
			t.Fatalf("list configmaps where the group has no RoleBinding: %v, want Forbidden", err)
		}
		if _, err := asAlice.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
			t.Fatalf("list secrets the group may not read: %v, want Forbidden", err)
		}
	})

	t.Run("client credentials and Impersonate headers are dropped", func(t *testing.T) {
		forged := f.client(t, alice, env.Config(t).BearerToken,
			rest.ImpersonationConfig{UserName: "admin", Groups: []string{"system:masters"}, Extra: map[string][]string{"scopes": {"all"}}})
		who, err := whoami(ctx, forged)
		if err != nil {
			t.Fatal(err)
		}
		if who.Username != login || slices.Contains(who.Groups, "system:masters") || len(who.Extra) != 0 {
			t.Fatalf("the API server sees %+v, want %s as the proxy made it", who, login)
		}
		if _, err := forged.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
			t.Fatalf("list secrets with forged admin headers: %v, want Forbidden", err)
		}
	})

	t.Run("a granted group replaces the tags of a tagged device", func(t *testing.T) {
		testpoll.Until(t, 30*time.Second, "robot in the granted group only", func() error {
			who, err := whoami(ctx, asRobot)
			if err != nil {
				return err
			}
			if who.Username != "robot.tail-test.ts.net" || !slices.Contains(who.Groups, "tailnet-readers") || slices.Contains(who.Groups, "tag:ci") {
				return fmt.Errorf("the API server sees %+v", who)
			}
			return nil
		})
	})

	t.Run("watch streams through", func(t *testing.T) {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		w, err := asAlice.CoreV1().ConfigMaps(ns).Watch(wctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		for _, name := range []string{"first", "second"} {
			if _, err := admin.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			select {
			case ev := <-w.ResultChan():
				cm, ok := ev.Object.(*corev1.ConfigMap)
				if ev.Type != watch.Added || !ok || cm.Name != name {
					t.Fatalf("watch event %s %#v, want ADDED %s", ev.Type, ev.Object, name)
				}
			case <-wctx.Done():
				t.Fatalf("no watch event for %s through the proxy", name)
			}
		}
	})
}

// In mode noauth the proxy adds no credentials of its own: the caller's
// bearer token is what the API server authenticates, and a caller
// without one is anonymous (not the proxy's admin identity).
func TestNoAuthMode(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	admin := env.Clientset(t)
	f := newFixture(t, ModeNoAuth)
	alice := f.tn.Node(t, "alice")
	sa, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "reader"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	grantRole(t, ns, "reader", rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: ns}, []string{"configmaps"}, "list")
	tr, err := admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa.Name, &authnv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Impersonation a caller sends is the API server's to judge with
	// the caller's own rights: this one has none.
	asReader := f.client(t, alice, tr.Status.Token, rest.ImpersonationConfig{})
	testpoll.Until(t, 30*time.Second, "the service account's token passes through", func() error {
		who, err := whoami(ctx, asReader)
		if err != nil {
			return err
		}
		if want := "system:serviceaccount:" + ns + ":reader"; who.Username != want {
			return fmt.Errorf("the API server sees %q, want %q", who.Username, want)
		}
		return nil
	})
	if _, err := asReader.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("list configmaps with the caller's token: %v", err)
	}
	if _, err := asReader.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("list secrets with the caller's token: %v, want Forbidden", err)
	}
	anon := f.client(t, alice, "", rest.ImpersonationConfig{})
	_, err = anon.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if !apierrors.IsForbidden(err) && !apierrors.IsUnauthorized(err) {
		t.Fatalf("list configmaps without a token: %v, want anonymous refused", err)
	}
	escalate := f.client(t, alice, tr.Status.Token, rest.ImpersonationConfig{UserName: "admin", Groups: []string{"system:masters"}})
	if _, err := escalate.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("impersonation by a caller without the right: %v, want Forbidden", err)
	}
}

// A caller WhoIs cannot identify gets 401 and nothing reaches the API
// server; neither does a request whose capability cannot be read.
func TestUnidentifiedCallerRefused(t *testing.T) {
	var hits atomic.Int32
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer upstream.Close()
	cases := map[string]struct {
		whois WhoIsFunc
		code  int
	}{
		"whois fails": {func(context.Context, string) (*apitype.WhoIsResponse, error) {
			return nil, fmt.Errorf("no such peer")
		}, http.StatusUnauthorized},
		"bad capability": {func(context.Context, string) (*apitype.WhoIsResponse, error) {
			return &apitype.WhoIsResponse{Node: &tailcfg.Node{Name: "x."}, UserProfile: &tailcfg.UserProfile{LoginName: "x@example.com"},
				CapMap: tailcfg.PeerCapMap{tailcfg.PeerCapabilityKubernetes: {`{"impersonate":{"groups":"not-a-list"}}`}}}, nil
		}, http.StatusForbidden},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			h, err := NewHandler(Options{Upstream: &rest.Config{Host: upstream.URL, BearerToken: "proxy-token"}, Mode: ModeAuth, WhoIs: c.whois})
			if err != nil {
				t.Fatal(err)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/secrets", nil))
			var st metav1.Status
			if rec.Code != c.code || json.Unmarshal(rec.Body.Bytes(), &st) != nil || st.Code != int32(c.code) {
				t.Fatalf("status %d, body %s; want %d with a Kubernetes Status", rec.Code, rec.Body, c.code)
			}
			if n := hits.Load(); n != 0 {
				t.Fatalf("the upstream got %d requests", n)
			}
		})
	}
	if _, err := NewHandler(Options{Upstream: &rest.Config{Host: upstream.URL}, Mode: "open", WhoIs: cases["whois fails"].whois}); err == nil {
		t.Fatal("mode \"open\" accepted")
	}
}
