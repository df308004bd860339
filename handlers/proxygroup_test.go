package handlers_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tailplane/tailplane/crds/tailscale/v1alpha1"
	"github.com/tailplane/tailplane/handlers/ingress"
	"github.com/tailplane/tailplane/handlers/lib/cluster"
	"github.com/tailplane/tailplane/handlers/lib/groupmember"
	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/handlers/lib/resources"
	"github.com/tailplane/tailplane/handlers/lib/tsservice"
	"github.com/tailplane/tailplane/handlers/service"
	"github.com/tailplane/tailplane/internal/proxystate"
	"github.com/tailplane/tailplane/internal/tailnet/tailnettest"
	"github.com/tailplane/tailplane/internal/testpoll"
	"github.com/tailplane/tailplane/proxy/config"
)

// groupFixture drives one ProxyGroup (cluster-scoped: named after the test
// namespace).
type groupFixture struct {
	*harness
	name string
}

func (h *harness) proxyGroup(spec string) *groupFixture {
	h.t.Helper()
	g := &groupFixture{harness: h, name: "pg-" + h.ns}
	h.createClusterCR(resources.ProxyGroups, "ProxyGroup", g.name, spec)
	return g
}

func (g *groupFixture) patch(spec string) {
	g.t.Helper()
	g.patchSpec(resources.ProxyGroups, g.name, spec)
}

func (g *groupFixture) get() *v1alpha1.ProxyGroup {
	g.t.Helper()
	u, err := g.dyn.Resource(resources.ProxyGroups).Get(g.ctx(), g.name, metav1.GetOptions{})
	if err != nil {
		g.t.Fatal(err)
	}
	var pg v1alpha1.ProxyGroup
	if err := cluster.FromUnstructured(u, &pg); err != nil {
		g.t.Fatal(err)
	}
	return &pg
}

func (g *groupFixture) replica(i int) proxyset.Names {
	return proxyset.Parent{Type: groupmember.ParentType, Name: g.name}.Names().Replica(i)
}

func (g *groupFixture) config(i int) (*config.Config, error) {
	s, err := g.kube.CoreV1().Secrets(g.opNS).Get(g.ctx(), g.replica(i).ConfigSecret, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return config.Parse(s.Data[config.SecretKey])
}

// login does what replica i's proxy does once logged in.
func (g *groupFixture) login(i int) string {
	g.t.Helper()
	var cfg *config.Config
	testpoll.Until(g.t, settle, "replica config", func() (err error) { cfg, err = g.config(i); return err })
	g.api.UseKey(cfg.AuthKey)
	id, fqdn, ip := fmt.Sprintf("nPG%d", i), cfg.Hostname+".tail1.ts.net", fmt.Sprintf("100.64.2.%d", i+1)
	g.api.AddDevice(tailnettest.Device{ID: id, Name: fqdn, Addresses: []string{ip}})
	g.writeState(i, map[string][]byte{proxystate.KeyDeviceID: []byte(id),
		proxystate.KeyDeviceFQDN: []byte(fqdn + "."), proxystate.KeyDeviceIPs: fmt.Appendf(nil, `[%q]`, ip)})
	// Its Pod runs and is Ready.
	g.pod(i, fmt.Sprintf("10.1.0.%d", 10+i), true)
	return id
}

// advertise does what replica i's proxy does when it hosts services.
func (g *groupFixture) advertise(i int, services ...string) {
	g.t.Helper()
	reports := map[string]proxystate.ServiceReport{}
	for _, s := range services {
		reports[s] = proxystate.ServiceReport{Advertised: true}
	}
	raw, _ := json.Marshal(reports)
	g.writeState(i, map[string][]byte{proxystate.KeyServices: raw})
}

func (g *groupFixture) writeState(i int, data map[string][]byte) {
	g.t.Helper()
	patch, _ := json.Marshal(map[string]any{"data": data})
	if _, err := g.kube.CoreV1().Secrets(g.opNS).Patch(g.ctx(), g.replica(i).StateSecret, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		g.t.Fatal(err)
	}
}

func (g *groupFixture) wantCondition(typ, status, reason, msgPart string) {
	g.t.Helper()
	testpoll.Until(g.t, settle, typ+" "+reason, func() error {
		pg := g.get()
		c := meta.FindStatusCondition(pg.Status.Conditions, typ)
		if c == nil || string(c.Status) != status || c.Reason != reason || !strings.Contains(c.Message, msgPart) {
			return fmt.Errorf("conditions %+v", pg.Status.Conditions)
		}
		return nil
	})
}

// hosted are the services replica i's config hosts.
func (g *groupFixture) hosted(i int) ([]config.Service, error) {
	cfg, err := g.config(i)
	if err != nil {
		return nil, err
	}
	if cfg.Role != config.RoleIngressGroup || cfg.Group == nil {
		return nil, fmt.Errorf("config of role %q", cfg.Role)
	}
	return cfg.Group.Services, nil
}

func (g *groupFixture) wantHosted(i int, names ...string) []config.Service {
	g.t.Helper()
	var got []config.Service
	testpoll.Until(g.t, settle, fmt.Sprintf("replica %d hosts %v", i, names), func() error {
		var err error
		if got, err = g.hosted(i); err != nil {
			return err
		}
		var have []string
		for _, s := range got {
			have = append(have, s.Name)
		}
		if !slices.Equal(have, names) {
			return fmt.Errorf("hosts %v", have)
		}
		return nil
	})
	return got
}

func (h *harness) wantTailscaleService(name string, check func(tailnettest.Service) error) {
	h.t.Helper()
	testpoll.Until(h.t, settle, "Tailscale Service "+name, func() error {
		s, ok := h.api.Services()[name]
		if !ok {
			return fmt.Errorf("no %s among %v", name, h.api.Services())
		}
		if check != nil {
			return check(s)
		}
		return nil
	})
}

func (h *harness) wantNoTailscaleService(name string) {
	h.t.Helper()
	testpoll.Until(h.t, settle, "Tailscale Service "+name+" deleted", func() error {
		if _, ok := h.api.Services()[name]; ok {
			return fmt.Errorf("%s still exists", name)
		}
		return nil
	})
}

func tlsHost(host string) []networkingv1.IngressTLS {
	return []networkingv1.IngressTLS{{Hosts: []string{host}}}
}

// A ProxyGroup's replicas come up and report; an Ingress and a LoadBalancer
// Service join it as Tailscale Services hosted by every replica, with status
// once a replica advertises them; scaling down deletes a device; a hostname
// change replaces the Tailscale Service; leaving the group and deleting
// release everything.
//
// It runs with the operator's own RBAC (deploy/manifests).
func TestProxyGroupIngressLifecycle(t *testing.T) {
	h := newHarnessOpts(t, true, nil)
	h.createIngressClass(false)
	g := h.proxyGroup(`{"type":"ingress"}`)
	g.wantCondition(v1alpha1.ProxyGroupReady, "False", v1alpha1.ReasonProxyGroupCreating, "")
	g.wantHosted(0)
	g.wantHosted(1)
	cfg0, _ := g.config(0)
	if cfg0.Hostname != g.name+"-0" || cfg0.AuthKey == "" {
		t.Fatalf("replica 0 config: %+v", cfg0)
	}
	g.login(0)
	g.wantCondition(v1alpha1.ProxyGroupAvailable, "True", v1alpha1.ReasonProxyGroupCreating, "1/2 ProxyGroup pods running")
	dev1 := g.login(1)
	g.wantCondition(v1alpha1.ProxyGroupReady, "True", v1alpha1.ReasonProxyGroupReady, "")
	g.wantCondition(v1alpha1.ProxyGroupAvailable, "True", v1alpha1.ReasonProxyGroupAvailable, "2/2 ProxyGroup pods running")
	if d := g.get().Status.Devices; len(d) != 2 || d[0].Hostname != g.name+"-0" {
		t.Fatalf("devices %+v", d)
	}

	// An Ingress joins.
	h.backend("web", 80)
	h.createIngress("web", map[string]string{"tailscale.com/proxy-group": g.name},
		networkingv1.IngressSpec{DefaultBackend: defaultBackend("web", 80), TLS: tlsHost("web")})
	h.wantTailscaleService("svc:web", func(s tailnettest.Service) error {
		if !slices.Equal(s.Ports, []string{"tcp:443"}) || !slices.Equal(s.Tags, []string{"tag:k8s"}) || len(s.Addrs) != 2 ||
			!strings.Contains(s.Annotations[tsservice.AnnotationOwnerReferences], `"operatorID":"`+operatorNodeID+`"`) {
			return fmt.Errorf("service %+v", s)
		}
		return nil
	})
	for i := range 2 {
		svcs := g.wantHosted(i, "svc:web")
		tls := svcs[0].L7.TLS
		if tls.Mode != config.TLSShared || tls.SecretName != tsservice.CertSecretName("web") || tls.Issue != (i == 0) {
			t.Fatalf("replica %d TLS %+v", i, tls)
		}
	}
	cert, err := h.kube.CoreV1().Secrets(h.opNS).Get(h.ctx(), tsservice.CertSecretName("web"), metav1.GetOptions{})
	if err != nil || cert.Type != corev1.SecretTypeTLS {
		t.Fatalf("shared certificate Secret: %v %v", cert, err)
	}
	testpoll.Until(t, settle, "replicas may write the certificate Secret", func() error {
		role, err := h.kube.RbacV1().Roles(h.opNS).Get(h.ctx(), g.replica(0).Base, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, r := range role.Rules {
			if slices.Contains(r.ResourceNames, cert.Name) && slices.Contains(r.Verbs, "update") {
				return nil
			}
		}
		return fmt.Errorf("rules %+v", role.Rules)
	})
	ingLB := func(want string) {
		t.Helper()
		testpoll.Until(t, settle, "Ingress status "+want, func() error {
			ing, err := h.kube.NetworkingV1().Ingresses(h.ns).Get(h.ctx(), "web", metav1.GetOptions{})
			if err != nil {
				return err
			}
			got := ""
			if lb := ing.Status.LoadBalancer.Ingress; len(lb) > 0 {
				got = lb[0].Hostname
			}
			if got != want {
				return fmt.Errorf("hostname %q", got)
			}
			return nil
		})
	}
	ingLB("")
	g.advertise(1, "svc:web")
	ingLB("web.tail1.ts.net")

	// A LoadBalancer Service joins: its ports, its conditions, its address.
	lb := loadBalancer("db", "tailscale")
	lb.Annotations = map[string]string{"tailscale.com/proxy-group": g.name}
	lb.Spec.Ports = []corev1.ServicePort{{Name: "pg", Port: 5432}}
	h.createService(lb)
	dbSvc := "svc:" + h.ns + "-db"
	h.wantTailscaleService(dbSvc, func(s tailnettest.Service) error {
		if !slices.Equal(s.Ports, []string{"do-not-validate"}) {
			return fmt.Errorf("ports %v", s.Ports)
		}
		return nil
	})
	g.wantHosted(0, dbSvc, "svc:web")
	svcCond := func(typ, status, reason, msgPart string) {
		t.Helper()
		testpoll.Until(t, settle, typ+" of db", func() error {
			c := meta.FindStatusCondition(h.service("db").Status.Conditions, typ)
			if c == nil || string(c.Status) != status || c.Reason != reason || !strings.Contains(c.Message, msgPart) {
				return fmt.Errorf("conditions %+v", h.service("db").Status.Conditions)
			}
			return nil
		})
	}
	svcCond(service.ConditionSvcConfigured, "False", service.ReasonSvcNoBackends, "0/2 proxy backends ready and advertising")
	g.advertise(0, dbSvc, "svc:web")
	svcCond(service.ConditionSvcConfigured, "True", service.ReasonSvcConfigured, "1/2 proxy backends ready and advertising")
	// The metrics tell the same: 2 of 2 replicas, svc:web on both, db on one.
	testpoll.Until(t, settle, "ProxyGroup metrics", func() error {
		pg := map[string]string{"proxygroup": g.name}
		for _, c := range []struct {
			name   string
			labels map[string]string
			want   float64
		}{
			{"tailplane_proxygroup_replicas_desired", pg, 2},
			{"tailplane_proxygroup_replicas_ready", pg, 2},
			{"tailplane_proxygroup_failovers_total", pg, 0},
			{"tailplane_proxygroup_service_advertising_replicas", map[string]string{"proxygroup": g.name, "service": "svc:web"}, 2},
			{"tailplane_proxygroup_service_advertising_replicas", map[string]string{"proxygroup": g.name, "service": dbSvc}, 1},
		} {
			if got, ok := h.metric(c.name, c.labels); !ok || got != c.want {
				return fmt.Errorf("%s%v = %v (present %v), want %v", c.name, c.labels, got, ok, c.want)
			}
		}
		if got, _ := h.metric("tailplane_auth_keys_minted_total", nil); got < 2 {
			return fmt.Errorf("auth keys minted = %v, want at least the 2 replicas' keys", got)
		}
		if got, _ := h.metric("tailplane_tailnet_api_calls_total", map[string]string{"operation": "put_service"}); got < 1 {
			return fmt.Errorf("put_service calls = %v, want at least 1", got)
		}
		return nil
	})
	// A valid member has no Valid condition: the official operator writes
	// it only as False.
	if c := meta.FindStatusCondition(h.service("db").Status.Conditions, service.ConditionSvcValid); c != nil {
		t.Errorf("a valid member has %s: %+v", service.ConditionSvcValid, c)
	}
	testpoll.Until(t, settle, "LoadBalancer status", func() error {
		ing := h.service("db").Status.LoadBalancer.Ingress
		want := h.api.Services()[dbSvc].Addrs[0]
		// One entry with both, as the official operator writes it.
		if len(ing) != 1 || ing[0].Hostname != h.ns+"-db.tail1.ts.net" || ing[0].IP != want {
			return fmt.Errorf("ingress %+v, want one entry with the name and %s", ing, want)
		}
		return nil
	})

	// An operator restart changes nothing: no new key, the same Tailscale
	// Services and addresses, the same status.
	keys, services := len(h.api.Keys()), h.api.Services()
	h.restart()
	g.wantCondition(v1alpha1.ProxyGroupReady, "True", v1alpha1.ReasonProxyGroupReady, "")
	svcCond(service.ConditionSvcConfigured, "True", service.ReasonSvcConfigured, "1/2 proxy backends ready and advertising")
	ingLB("web.tail1.ts.net")
	if len(h.api.Keys()) != keys || !reflect.DeepEqual(h.api.Services(), services) {
		t.Fatalf("restart changed the tailnet: %d keys (was %d), services %+v (was %+v)", len(h.api.Keys()), keys, h.api.Services(), services)
	}

	// Scale down: replica 1's device goes.
	g.patch(`{"replicas":1}`)
	testpoll.Until(t, settle, "replica 1 device deleted", func() error {
		if !slices.Contains(h.api.Deleted(), dev1) {
			return fmt.Errorf("deleted %v", h.api.Deleted())
		}
		if _, err := g.config(1); !apierrors.IsNotFound(err) {
			return fmt.Errorf("replica 1 config: %v", err)
		}
		return nil
	})

	// A new hostname is a new Tailscale Service; the old one goes.
	if _, err := h.kube.NetworkingV1().Ingresses(h.ns).Patch(h.ctx(), "web", types.MergePatchType,
		[]byte(`{"spec":{"tls":[{"hosts":["web2"]}]}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	h.wantTailscaleService("svc:web2", nil)
	h.wantNoTailscaleService("svc:web")
	g.wantHosted(0, dbSvc, "svc:web2")

	// Leaving the group: the Ingress gets a proxy of its own; its Tailscale
	// Service, certificate and finalizer go.
	if _, err := h.kube.NetworkingV1().Ingresses(h.ns).Patch(h.ctx(), "web", types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"tailscale.com/proxy-group":null}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	h.wantNoTailscaleService("svc:web2")
	g.wantHosted(0, dbSvc)
	testpoll.Until(t, settle, "Ingress released by the group", func() error {
		ing, err := h.kube.NetworkingV1().Ingresses(h.ns).Get(h.ctx(), "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if slices.Contains(ing.Finalizers, ingress.FinalizerProxyGroup) {
			return fmt.Errorf("finalizers %v", ing.Finalizers)
		}
		if _, err := h.kube.CoreV1().Secrets(h.opNS).Get(h.ctx(), tsservice.CertSecretName("web2"), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("certificate Secret: %v", err)
		}
		return h.proxyExists("ingress", "web")
	})

	// Deleting the Service deletes its Tailscale Service.
	if err := h.kube.CoreV1().Services(h.ns).Delete(h.ctx(), "db", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.wantNoTailscaleService(dbSvc)
	g.wantHosted(0)
}

// Members that cannot be served say why and disturb nothing: a ProxyGroup
// that does not exist (served once it does), a Tailscale Service someone
// made by hand, and an invalid ProxyGroup.
func TestProxyGroupMembersRefused(t *testing.T) {
	h := newHarness(t, nil)
	h.createIngressClass(false)
	name := "pg-" + h.ns
	h.backend("web", 80)
	h.createIngress("early", map[string]string{"tailscale.com/proxy-group": name},
		networkingv1.IngressSpec{DefaultBackend: defaultBackend("web", 80), TLS: tlsHost("early")})
	h.wantEvent(h.ns, "early", corev1.EventTypeWarning, groupmember.ReasonProxyGroupNotFound, fmt.Sprintf("ProxyGroup %q does not exist", name))
	g := h.proxyGroup(`{"type":"ingress","replicas":1}`)
	h.wantTailscaleService("svc:early", nil)
	g.wantHosted(0, "svc:early")

	h.api.PutService(tailnettest.Service{Name: "svc:handmade", Addrs: []string{"100.100.9.9"}})
	h.createIngress("clash", map[string]string{"tailscale.com/proxy-group": name},
		networkingv1.IngressSpec{DefaultBackend: defaultBackend("web", 80), TLS: tlsHost("handmade")})
	h.wantEvent(h.ns, "clash", corev1.EventTypeWarning, groupmember.ReasonInvalidTailscaleSvc, "svc:handmade already exists and is not managed")
	if s := h.api.Services()["svc:handmade"]; len(s.Annotations) != 0 {
		t.Fatalf("the hand-made Tailscale Service was changed: %+v", s)
	}

	// A device with the name a member wants (the seed's my-app pair) is
	// pointed out; the member is still served.
	h.api.AddDevice(tailnettest.Device{ID: "nShadow", Name: "shadowed.tail1.ts.net", Addresses: []string{"100.64.9.9"}})
	h.createIngress("shadowed", map[string]string{"tailscale.com/proxy-group": name},
		networkingv1.IngressSpec{DefaultBackend: defaultBackend("web", 80), TLS: tlsHost("shadowed")})
	h.wantEvent(h.ns, "shadowed", corev1.EventTypeWarning, groupmember.ReasonNameShadowed,
		"device shadowed.tail1.ts.net has the MagicDNS name of Tailscale Service svc:shadowed")
	h.wantTailscaleService("svc:shadowed", nil)

	// A group on a Tailnet that does not exist says so; an Ingress naming
	// a group of another type is refused.
	eg := &groupFixture{harness: h, name: "eg-" + h.ns}
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "tailscale.com/v1alpha1", "kind": "ProxyGroup",
		"metadata": map[string]any{"name": eg.name}, "spec": map[string]any{"type": "egress", "tailnet": "other"}}}
	if _, err := h.dyn.Resource(resources.ProxyGroups).Create(h.ctx(), obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.dyn.Resource(resources.ProxyGroups).Delete(h.ctx(), eg.name, metav1.DeleteOptions{}) })
	eg.wantCondition(v1alpha1.ProxyGroupReady, "False", v1alpha1.ReasonProxyGroupTailnetUnavailable, `tailnet "other": no such Tailnet`)
	h.createIngress("wrongtype", map[string]string{"tailscale.com/proxy-group": eg.name},
		networkingv1.IngressSpec{DefaultBackend: defaultBackend("web", 80), TLS: tlsHost("wrongtype")})
	h.wantEvent(h.ns, "wrongtype", corev1.EventTypeWarning, groupmember.ReasonIngressSvcInvalid, `is of type "egress"`)

	// Deleting the group while an Ingress uses it: the Ingress says so and
	// loses its address.
	g.login(0)
	g.advertise(0, "svc:early")
	testpoll.Until(t, settle, "early has an address", func() error {
		ing, err := h.kube.NetworkingV1().Ingresses(h.ns).Get(h.ctx(), "early", metav1.GetOptions{})
		if err != nil || len(ing.Status.LoadBalancer.Ingress) == 0 {
			return fmt.Errorf("status %+v %v", ing.Status, err)
		}
		return nil
	})
	if err := h.dyn.Resource(resources.ProxyGroups).Delete(h.ctx(), g.name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testpoll.Until(t, settle, "early lost its address", func() error {
		ing, err := h.kube.NetworkingV1().Ingresses(h.ns).Get(h.ctx(), "early", metav1.GetOptions{})
		if err != nil || len(ing.Status.LoadBalancer.Ingress) != 0 {
			return fmt.Errorf("status %+v %v", ing.Status, err)
		}
		return nil
	})
	testpoll.Until(t, settle, "a second ProxyGroupNotFound", func() error {
		list, err := h.kube.CoreV1().Events(h.ns).List(h.ctx(), metav1.ListOptions{FieldSelector: "involvedObject.name=early,reason=" + groupmember.ReasonProxyGroupNotFound})
		if err != nil || len(list.Items) == 0 || list.Items[0].Count < 2 {
			return fmt.Errorf("events %+v %v", list, err)
		}
		return nil
	})
}

// A RoutingPlugin targeting a ProxyGroup Ingress runs in the group's
// replicas: its service carries the plugin, and the replicas may read the
// module's copy.
func TestProxyGroupMemberRunsItsPlugins(t *testing.T) {
	mod := canaryModule(t)
	sum := sha256.Sum256(mod)
	h := newHarness(t, nil)
	h.createIngressClass(false)
	g := h.proxyGroup(`{"type":"ingress","replicas":1}`)
	h.backend("web", 80)
	h.createIngress("site", map[string]string{"tailscale.com/proxy-group": g.name},
		networkingv1.IngressSpec{DefaultBackend: defaultBackend("web", 80), TLS: tlsHost("site")})
	g.wantHosted(0, "svc:site")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "canary", Namespace: h.ns}, BinaryData: map[string][]byte{"module.wasm.gz": gz(mod)}}
	if _, err := h.kube.CoreV1().ConfigMaps(h.ns).Create(h.ctx(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.routingPlugin("canary", "canary", hex.EncodeToString(sum[:]), "route")
	var copyName string
	testpoll.Until(t, settle, "the plugin in the replica's config", func() error {
		svcs, err := g.hosted(0)
		if err != nil {
			return err
		}
		if len(svcs) != 1 || len(svcs[0].Plugins) != 1 || svcs[0].Plugins[0].Name != h.ns+"/canary" {
			return fmt.Errorf("services %+v", svcs)
		}
		var spec struct {
			Module struct {
				SecretKeyRef struct{ Name string } `json:"secretKeyRef"`
			} `json:"module"`
		}
		if err := json.Unmarshal(svcs[0].Plugins[0].Spec, &spec); err != nil {
			return err
		}
		copyName = spec.Module.SecretKeyRef.Name
		return nil
	})
	testpoll.Until(t, settle, "replicas may read the module copy", func() error {
		role, err := h.kube.RbacV1().Roles(h.opNS).Get(h.ctx(), g.replica(0).Base, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, r := range role.Rules {
			if copyName != "" && slices.Contains(r.ResourceNames, copyName) {
				return nil
			}
		}
		return fmt.Errorf("rules %+v lack %q", role.Rules, copyName)
	})
}

// The operator dies right after creating a member's Tailscale Service,
// before it wrote anything else (the member's status): the next operator
// finishes the job with the same service, and deleting the member then
// leaves no service and no finalizer.
func TestProxyGroupMemberOperatorKilledAfterCreatingItsService(t *testing.T) {
	h := newHarness(t, nil)
	h.createIngressClass(false)
	g := h.proxyGroup(`{"type":"ingress","replicas":1}`)
	g.login(0)
	g.wantCondition(v1alpha1.ProxyGroupAvailable, "True", v1alpha1.ReasonProxyGroupAvailable, "1/1 ProxyGroup pods running")
	h.backend("web", 80)
	// Every later call to the services API fails, so the operator is
	// stuck right after the PUT until it is stopped.
	created := make(chan struct{})
	var once sync.Once
	h.api.OnPutService(func(s tailnettest.Service) {
		if s.Name == "svc:crash" {
			once.Do(func() {
				h.api.Fail(tailnettest.EndpointServices, tailnettest.Failure{Status: http.StatusServiceUnavailable, Message: "unavailable"})
				close(created)
			})
		}
	})
	h.createIngress("crash", map[string]string{"tailscale.com/proxy-group": g.name},
		networkingv1.IngressSpec{DefaultBackend: defaultBackend("web", 80), TLS: tlsHost("crash")})
	select {
	case <-created:
	case <-time.After(settle):
		t.Fatal("the operator did not create svc:crash")
	}
	h.stop()
	ing, err := h.kube.NetworkingV1().Ingresses(h.ns).Get(h.ctx(), "crash", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ing.Status.LoadBalancer.Ingress) != 0 || !slices.Contains(ing.Finalizers, ingress.FinalizerProxyGroup) {
		t.Fatalf("at the crash: status %+v, finalizers %v; want no status and the finalizer", ing.Status.LoadBalancer, ing.Finalizers)
	}

	h.api.OnPutService(nil)
	h.api.Recover(tailnettest.EndpointServices)
	h.start()
	g.advertise(0, "svc:crash")
	testpoll.Until(t, settle, "the Ingress's address after the restart", func() error {
		ing, err := h.kube.NetworkingV1().Ingresses(h.ns).Get(h.ctx(), "crash", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if lb := ing.Status.LoadBalancer.Ingress; len(lb) == 0 || lb[0].Hostname != "crash.tail1.ts.net" {
			return fmt.Errorf("status %+v", ing.Status.LoadBalancer)
		}
		return nil
	})
	var names []string
	for name, s := range h.api.Services() {
		names = append(names, name)
		if name == "svc:crash" && (s.Annotations[tsservice.AnnotationOwnerReferences] != `{"ownerRefs":[{"operatorID":"`+operatorNodeID+`"}]}` ||
			!strings.Contains(s.Annotations[tsservice.AnnotationOwnerResources], `"name":"crash"`)) {
			t.Fatalf("svc:crash lost its owner: %+v", s)
		}
	}
	if len(names) != 1 {
		t.Fatalf("Tailscale Services %v, want svc:crash only", names)
	}

	if err := h.kube.NetworkingV1().Ingresses(h.ns).Delete(h.ctx(), "crash", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.wantNoTailscaleService("svc:crash")
	testpoll.Until(t, settle, "the Ingress gone (finalizer removed)", func() error {
		if _, err := h.kube.NetworkingV1().Ingresses(h.ns).Get(h.ctx(), "crash", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there: %v", err)
		}
		return nil
	})
}
