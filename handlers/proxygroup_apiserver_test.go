package handlers_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tailplane/tailplane/crds/tailscale/v1alpha1"
	"github.com/tailplane/tailplane/handlers/lib/resources"
	"github.com/tailplane/tailplane/handlers/lib/tsservice"
	"github.com/tailplane/tailplane/handlers/proxygroup"
	"github.com/tailplane/tailplane/internal/tailnet/tailnettest"
	"github.com/tailplane/tailplane/internal/testpoll"
	"github.com/tailplane/tailplane/proxy/config"
)

// A kube-apiserver ProxyGroup: its Tailscale Service owned by the group,
// every replica serving the API server under it (replica 0 issuing the
// certificate), impersonation rights bound in auth mode only, status.url
// and the official conditions once a replica advertises, and everything
// gone with the group. With the operator's own RBAC.
func TestProxyGroupKubeAPIServer(t *testing.T) {
	h := newHarnessOpts(t, true, nil)
	g := h.proxyGroup(`{"type":"kube-apiserver","kubeAPIServer":{"hostname":"k8s-api"}}`)
	h.wantTailscaleService("svc:k8s-api", func(s tailnettest.Service) error {
		if !strings.Contains(s.Annotations[tsservice.AnnotationOwnerReferences], `"kind":"ProxyGroup","name":"`+g.name+`"`) || s.Ports[0] != "tcp:443" {
			return fmt.Errorf("service %+v", s)
		}
		return nil
	})
	apiServer := func(i int) (*config.APIServer, error) {
		cfg, err := g.config(i)
		if err != nil {
			return nil, err
		}
		if cfg.Role != config.RoleKubeAPIServer || cfg.APIServer == nil {
			return nil, fmt.Errorf("config of role %q", cfg.Role)
		}
		return cfg.APIServer, nil
	}
	testpoll.Until(t, settle, "replica configs", func() error {
		for i := range 2 {
			a, err := apiServer(i)
			if err != nil {
				return err
			}
			if a.ServiceName != "svc:k8s-api" || a.EffectiveMode() != config.APIServerAuth || a.TLS.Issue != (i == 0) ||
				a.TLS.SecretName != tsservice.CertSecretName("k8s-api") {
				return fmt.Errorf("replica %d: %+v", i, a)
			}
		}
		return nil
	})
	binding := func() error {
		_, err := h.kube.RbacV1().ClusterRoleBindings().Get(h.ctx(), proxygroup.ImpersonatorBindingName(g.name), metav1.GetOptions{})
		return err
	}
	testpoll.Until(t, settle, "impersonation bound in auth mode", binding)

	g.login(0)
	g.login(1)
	g.advertise(1, "svc:k8s-api")
	g.wantCondition(proxygroup.ConditionAPIServerConfigured, "True", proxygroup.ReasonAPIServerConfigured, "1/2 proxy backends ready and advertising")
	g.wantCondition(proxygroup.ConditionAPIServerValid, "True", proxygroup.ReasonAPIServerValid, "")
	testpoll.Until(t, settle, "status.url", func() error {
		if u := g.get().Status.URL; u != "https://k8s-api.tail1.ts.net" {
			return fmt.Errorf("url %q", u)
		}
		return nil
	})

	// An operator restart changes nothing: no new key, the same Tailscale
	// Service, binding and conditions.
	keys, services := len(h.api.Keys()), h.api.Services()
	h.restart()
	g.wantCondition(v1alpha1.ProxyGroupReady, "True", v1alpha1.ReasonProxyGroupReady, "")
	g.wantCondition(proxygroup.ConditionAPIServerConfigured, "True", proxygroup.ReasonAPIServerConfigured, "1/2 proxy backends ready and advertising")
	if err := binding(); err != nil {
		t.Fatalf("binding after the restart: %v", err)
	}
	if len(h.api.Keys()) != keys || !reflect.DeepEqual(h.api.Services(), services) {
		t.Fatalf("restart changed the tailnet: %d keys (was %d), services %+v (was %+v)", len(h.api.Keys()), keys, h.api.Services(), services)
	}

	// noauth: the replicas forward the callers' credentials; no
	// impersonation rights are left bound.
	g.patch(`{"kubeAPIServer":{"hostname":"k8s-api","mode":"noauth"}}`)
	testpoll.Until(t, settle, "noauth", func() error {
		a, err := apiServer(0)
		if err != nil || a.EffectiveMode() != config.APIServerNoAuth {
			return fmt.Errorf("%+v %v", a, err)
		}
		if err := binding(); !apierrors.IsNotFound(err) {
			return fmt.Errorf("binding: %v", err)
		}
		return nil
	})

	// Deleting the group deletes its Tailscale Service, certificate and
	// binding.
	if err := h.dyn.Resource(resources.ProxyGroups).Delete(h.ctx(), g.name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.wantNoTailscaleService("svc:k8s-api")
	testpoll.Until(t, settle, "certificate gone", func() error {
		if _, err := h.kube.CoreV1().Secrets(h.opNS).Get(h.ctx(), tsservice.CertSecretName("k8s-api"), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("certificate Secret: %v", err)
		}
		return nil
	})
}
