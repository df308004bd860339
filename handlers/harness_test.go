package handlers_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/tailplane/tailplane/crds"
	"github.com/tailplane/tailplane/deploy/manifests"
	"github.com/tailplane/tailplane/handlers"
	"github.com/tailplane/tailplane/handlers/lib/cluster"
	"github.com/tailplane/tailplane/handlers/lib/opmetrics"
	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/handlers/lib/settings"
	"github.com/tailplane/tailplane/internal/proxystate"
	"github.com/tailplane/tailplane/internal/tailnet"
	"github.com/tailplane/tailplane/internal/tailnet/tailnettest"
	"github.com/tailplane/tailplane/internal/testenv"
	"github.com/tailplane/tailplane/internal/testpoll"
	"github.com/tailplane/tailplane/proxy/config"
	"github.com/tailplane/tailplane/runtime"
)

var env = testenv.New()

// operatorNodeID is the test operator's own device.
const operatorNodeID = "nOPERATOR"

func TestMain(m *testing.M) { os.Exit(env.Run(m)) }

// harness is one operator (handlers on the runtime) against the package's
// real API server, with the fake tailnet API. Tests run one at a time: each
// operator watches the whole cluster.
type harness struct {
	t        *testing.T
	kube     kubernetes.Interface
	dyn      dynamic.Interface
	api      *tailnettest.Server
	settings settings.Settings
	opNS     string // operator namespace
	ns       string // the user's namespace

	// asOperator runs the operator with the identity and RBAC of
	// deploy/manifests (ServiceAccount tailscale/operator).
	asOperator bool
	// dns answers the operator's lookups of ExternalNames.
	dns *fakeDNS
	// control, when set, wraps the operator's backend (a control server
	// lacking features); set it before the operator (re)starts.
	control func(tailnet.Backend) tailnet.Backend
	// adjustDeps, when set, changes the operator's Deps before its
	// handlers register; set it before the operator (re)starts.
	adjustDeps func(*cluster.Deps)
	// hardStop makes stop a kill rather than a graceful stop: handlers in
	// flight are cancelled at once instead of finishing their cycle. Set
	// it before the operator (re)starts.
	hardStop bool

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan error
	// metrics is the registry of the running operator's opmetrics (a new
	// one at each start, as in a new process).
	metrics *prometheus.Registry
}

var installCRDs sync.Once

func newHarness(t *testing.T, adjust func(*settings.Settings)) *harness {
	return newHarnessOpts(t, false, adjust)
}

func newHarnessOpts(t *testing.T, asOperator bool, adjust func(*settings.Settings)) *harness {
	t.Helper()
	h := &harness{asOperator: asOperator, dns: &fakeDNS{}, t: t, kube: env.Clientset(t), dyn: dynamic.NewForConfigOrDie(env.Config(t)), api: tailnettest.NewServer()}
	t.Cleanup(h.api.Close)
	installCRDs.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		objs, err := crds.Objects()
		if err == nil {
			err = testenv.InstallCRDs(ctx, h.dyn, objs...)
		}
		if err != nil {
			t.Fatalf("install CRDs: %v", err)
		}
	})
	h.opNS, h.ns = env.Namespace(t), env.Namespace(t)
	if asOperator {
		h.opNS = "tailscale"
		h.applyManifests()
	}
	h.settings = settings.Settings{
		Namespace: h.opNS, ProxyImage: "tailplane-proxy:test", ProxyTags: []string{"tag:k8s"},
		IngressClassName: "tailscale", Logging: "info",
	}
	if adjust != nil {
		adjust(&h.settings)
	}
	h.start()
	t.Cleanup(h.stop)
	return h
}

// start runs a fresh operator process-equivalent: new runtime, new Deps.
func (h *harness) start() {
	h.t.Helper()
	backend, err := tailnet.NewTailscale(tailnet.Options{LoginServer: h.api.URL, ClientID: tailnettest.ClientID, ClientSecret: tailnettest.ClientSecret})
	if err != nil {
		h.t.Fatal(err)
	}
	var be tailnet.Backend = backend
	if h.control != nil {
		be = h.control(backend)
	}
	cfg := env.Config(h.t)
	cfg.QPS, cfg.Burst = 200, 400
	if h.asOperator {
		cfg.Impersonate = rest.ImpersonationConfig{
			UserName: "system:serviceaccount:tailscale:operator",
			Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:tailscale", "system:authenticated"},
		}
	}
	rs := runtime.Settings{
		HealthAddress: "-", MetricsAddress: "-", Finalizer: "tailscale.com/finalizer",
		MinBackoff: 200 * time.Millisecond, MaxBackoff: 2 * time.Second,
		Logger: runtime.NewLogger(testLogWriter(), false),
	}
	if h.hardStop {
		rs.ShutdownTimeout = time.Millisecond
	}
	op, err := runtime.New(cfg, rs)
	if err != nil {
		h.t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m, err := opmetrics.New(reg)
	if err != nil {
		h.t.Fatal(err)
	}
	d := cluster.NewDeps(op, kubernetes.NewForConfigOrDie(cfg), dynamic.NewForConfigOrDie(cfg), m.Tailnet(be), h.settings, runtime.NewLogger(testLogWriter(), false))
	d.Metrics = m
	d.WatchNamespace = h.ns
	d.OperatorNodeID = operatorNodeID
	d.CertRefresh = 500 * time.Millisecond
	d.Resolver, d.ResolveRetry = h.dns, 300*time.Millisecond
	if h.adjustDeps != nil {
		h.adjustDeps(d)
	}
	if h.settings.HandBack {
		handlers.RegisterHandBack(op, d)
	} else {
		handlers.Register(op, d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- op.Run(ctx) }()
	h.mu.Lock()
	h.cancel, h.done, h.metrics = cancel, done, reg
	h.mu.Unlock()
}

// applyManifests applies deploy/manifests (namespace, CRDs, RBAC, ...) as
// admin, the way a user installs the operator.
func (h *harness) applyManifests() {
	h.t.Helper()
	objs, err := manifests.Objects()
	if err != nil {
		h.t.Fatal(err)
	}
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		mapping, err := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(h.kube.Discovery())).RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			h.t.Fatalf("%s: %v", gvk, err)
		}
		ri := h.dyn.Resource(mapping.Resource)
		var err2 error
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			_, err2 = ri.Namespace(o.GetNamespace()).Apply(h.ctx(), o.GetName(), o, metav1.ApplyOptions{FieldManager: "test", Force: true})
		} else {
			_, err2 = ri.Apply(h.ctx(), o.GetName(), o, metav1.ApplyOptions{FieldManager: "test", Force: true})
		}
		if err2 != nil {
			h.t.Fatalf("apply %s %s: %v", gvk.Kind, o.GetName(), err2)
		}
	}
}

func (h *harness) stop() {
	h.mu.Lock()
	cancel, done := h.cancel, h.done
	h.cancel, h.done = nil, nil
	h.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, context.Canceled) {
			h.t.Logf("operator stopped: %v", err)
		}
	case <-time.After(30 * time.Second):
		h.t.Error("operator did not stop within 30s")
	}
}

func (h *harness) restart() { h.stop(); h.start() }

// settle bounds every wait for the operator to converge.
const settle = 45 * time.Second

func (h *harness) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	h.t.Cleanup(cancel)
	return ctx
}

func (h *harness) service(name string) *corev1.Service {
	h.t.Helper()
	svc, err := h.kube.CoreV1().Services(h.ns).Get(h.ctx(), name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return svc
}

func (h *harness) createService(svc *corev1.Service) {
	h.t.Helper()
	svc.Namespace = h.ns
	if len(svc.Spec.Ports) == 0 {
		svc.Spec.Ports = []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}
	}
	if _, err := h.kube.CoreV1().Services(h.ns).Create(h.ctx(), svc, metav1.CreateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) patchService(name, patch string) {
	h.t.Helper()
	if _, err := h.kube.CoreV1().Services(h.ns).Patch(h.ctx(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) names(parentType, name string) proxyset.Names {
	return proxyset.Parent{Type: parentType, Namespace: h.ns, Name: name}.Names()
}

// proxyConfig reads a proxy's config from its config Secret.
func (h *harness) proxyConfig(parentType, name string) (*config.Config, error) {
	s, err := h.kube.CoreV1().Secrets(h.opNS).Get(h.ctx(), h.names(parentType, name).ConfigSecret, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	var c config.Config
	if err := json.Unmarshal(s.Data[config.SecretKey], &c); err != nil {
		return nil, err
	}
	return &c, nil
}

// proxyExists checks every object of a proxy.
func (h *harness) proxyExists(parentType, name string) error {
	n := h.names(parentType, name)
	ctx := h.ctx()
	var errs []error
	_, err := h.kube.AppsV1().StatefulSets(h.opNS).Get(ctx, n.Base, metav1.GetOptions{})
	errs = append(errs, err)
	_, err = h.kube.CoreV1().Secrets(h.opNS).Get(ctx, n.ConfigSecret, metav1.GetOptions{})
	errs = append(errs, err)
	_, err = h.kube.CoreV1().Secrets(h.opNS).Get(ctx, n.StateSecret, metav1.GetOptions{})
	errs = append(errs, err)
	_, err = h.kube.CoreV1().ServiceAccounts(h.opNS).Get(ctx, n.Base, metav1.GetOptions{})
	errs = append(errs, err)
	_, err = h.kube.RbacV1().Roles(h.opNS).Get(ctx, n.Base, metav1.GetOptions{})
	errs = append(errs, err)
	_, err = h.kube.RbacV1().RoleBindings(h.opNS).Get(ctx, n.Base, metav1.GetOptions{})
	errs = append(errs, err)
	return errors.Join(errs...)
}

// proxyGone checks that no object of the proxy is left.
func (h *harness) proxyGone(parentType, name string) error {
	n := h.names(parentType, name)
	ctx := h.ctx()
	checks := map[string]error{}
	_, checks["StatefulSet"] = h.kube.AppsV1().StatefulSets(h.opNS).Get(ctx, n.Base, metav1.GetOptions{})
	_, checks["config Secret"] = h.kube.CoreV1().Secrets(h.opNS).Get(ctx, n.ConfigSecret, metav1.GetOptions{})
	_, checks["state Secret"] = h.kube.CoreV1().Secrets(h.opNS).Get(ctx, n.StateSecret, metav1.GetOptions{})
	_, checks["ServiceAccount"] = h.kube.CoreV1().ServiceAccounts(h.opNS).Get(ctx, n.Base, metav1.GetOptions{})
	_, checks["Role"] = h.kube.RbacV1().Roles(h.opNS).Get(ctx, n.Base, metav1.GetOptions{})
	_, checks["RoleBinding"] = h.kube.RbacV1().RoleBindings(h.opNS).Get(ctx, n.Base, metav1.GetOptions{})
	for what, err := range checks {
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("%s still there (%v)", what, err)
		}
	}
	return nil
}

// simulateLogin does what the proxy does once logged in: it writes the
// device keys into its state Secret (and the control plane knows the
// device, and counts the config's auth key as used).
func (h *harness) simulateLogin(parentType, name, id, fqdn string, ips ...string) {
	h.t.Helper()
	if cfg, err := h.proxyConfig(parentType, name); err == nil && cfg.AuthKey != "" {
		h.api.UseKey(cfg.AuthKey)
	}
	h.api.AddDevice(tailnettest.Device{ID: id, Name: fqdn, Addresses: ips})
	ipsJSON, _ := json.Marshal(ips)
	patch, _ := json.Marshal(map[string]any{"data": map[string][]byte{
		proxystate.KeyDeviceID: []byte(id), proxystate.KeyDeviceFQDN: []byte(fqdn + "."), proxystate.KeyDeviceIPs: ipsJSON,
	}})
	state := h.names(parentType, name).StateSecret
	if _, err := h.kube.CoreV1().Secrets(h.opNS).Patch(h.ctx(), state, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

// exposedOnline creates an exposed Service and has its proxy log in as
// device id at ip: the Service is Ready.
func (h *harness) exposedOnline(name, id, ip string) {
	h.t.Helper()
	h.createService(exposed(name, nil))
	testpoll.Until(h.t, settle, "proxy of "+name, func() error { return h.proxyExists("svc", name) })
	h.simulateLogin("svc", name, id, h.ns+"-"+name+".tail1.ts.net", ip)
	h.wantCondition(name, "True", "ProxyCreated", "ProxyCreated")
}

// condition returns the Service's TailscaleProxyReady condition.
func (h *harness) condition(name string) *metav1.Condition {
	for _, c := range h.service(name).Status.Conditions {
		if c.Type == "TailscaleProxyReady" {
			return &c
		}
	}
	return nil
}

func (h *harness) wantCondition(name, status, reason, msgPart string) {
	h.t.Helper()
	testpoll.Until(h.t, settle, "condition of "+name, func() error {
		c := h.condition(name)
		if c == nil {
			return errors.New("no TailscaleProxyReady condition")
		}
		if string(c.Status) != status || c.Reason != reason || !strings.Contains(c.Message, msgPart) {
			return fmt.Errorf("got %s/%s %q, want %s/%s containing %q", c.Status, c.Reason, c.Message, status, reason, msgPart)
		}
		return nil
	})
}

// wantEvent waits for an Event about the object with reason and a message
// containing msgPart.
func (h *harness) wantEvent(namespace, objName, eventType, reason, msgPart string) {
	h.t.Helper()
	testpoll.Until(h.t, settle, "Event "+reason+" on "+objName, func() error {
		list, err := h.kube.CoreV1().Events(namespace).List(h.ctx(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + objName})
		if err != nil {
			return err
		}
		var seen []string
		for _, e := range list.Items {
			if e.Type == eventType && e.Reason == reason && strings.Contains(e.Message, msgPart) {
				return nil
			}
			seen = append(seen, e.Type+"/"+e.Reason+": "+e.Message)
		}
		return fmt.Errorf("not found among %q", seen)
	})
}

// fakeDNS resolves the names added to it, and no other.
type fakeDNS struct {
	mu    sync.Mutex
	hosts map[string][]string
	asked map[string]int
}

// lookups is how often host was looked up.
func (f *fakeDNS) lookups(host string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.asked[host]
}

func (f *fakeDNS) add(host string, addrs ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.hosts == nil {
		f.hosts = map[string][]string{}
	}
	f.hosts[host] = addrs
}

func (f *fakeDNS) LookupHost(_ context.Context, host string) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.asked == nil {
		f.asked = map[string]int{}
	}
	f.asked[host]++
	if a, ok := f.hosts[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// testLogWriter is stderr when HANDLERS_TEST_LOG is set, for debugging.
func testLogWriter() io.Writer {
	if os.Getenv("HANDLERS_TEST_LOG") != "" {
		return os.Stderr
	}
	return io.Discard
}

// createClusterCR creates a cluster-scoped tailscale.com object of kind
// with spec (JSON), deleted at the end of the test while this test's
// operator still runs (it holds the finalizer).
func (h *harness) createClusterCR(res schema.GroupVersionResource, kind, name, spec string) {
	h.t.Helper()
	obj := &unstructured.Unstructured{}
	if err := json.Unmarshal(fmt.Appendf(nil, `{"apiVersion":"tailscale.com/v1alpha1","kind":%q,"metadata":{"name":%q},"spec":%s}`, kind, name, spec), &obj.Object); err != nil {
		h.t.Fatal(err)
	}
	if _, err := h.dyn.Resource(res).Create(h.ctx(), obj, metav1.CreateOptions{}); err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() {
		_ = h.dyn.Resource(res).Delete(h.ctx(), name, metav1.DeleteOptions{})
		testpoll.Until(h.t, settle, kind+" gone", func() error {
			if _, err := h.dyn.Resource(res).Get(h.ctx(), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("still there: %v", err)
			}
			return nil
		})
	})
}

// patchSpec merges spec (JSON) into a cluster-scoped object's spec.
func (h *harness) patchSpec(res schema.GroupVersionResource, name, spec string) {
	h.t.Helper()
	if _, err := h.dyn.Resource(res).Patch(h.ctx(), name, types.MergePatchType, fmt.Appendf(nil, `{"spec":%s}`, spec), metav1.PatchOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

// metric is the value of the running operator's series name{labels} (the
// sum over the series that match), and whether one matched.
func (h *harness) metric(name string, labels map[string]string) (float64, bool) {
	h.mu.Lock()
	reg := h.metrics
	h.mu.Unlock()
	fams, err := reg.Gather()
	if err != nil {
		h.t.Fatal(err)
	}
	sum, found := 0.0, false
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if v, ok := labels[l.GetName()]; ok && v != l.GetValue() {
					continue next
				}
			}
			found = true
			if m.Counter != nil {
				sum += m.GetCounter().GetValue()
			} else {
				sum += m.GetGauge().GetValue()
			}
		}
	}
	return sum, found
}
