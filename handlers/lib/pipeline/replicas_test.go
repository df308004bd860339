package pipeline_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/tailplane/tailplane/handlers/lib/cluster"
	"github.com/tailplane/tailplane/handlers/lib/pipeline"
	"github.com/tailplane/tailplane/handlers/lib/proxyclassrules"
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

func TestMain(m *testing.M) { os.Exit(env.Run(m)) }

var configMaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// replicated is a module of the test only: a ConfigMap labelled
// tailplane.test/proxy asks for data.replicas L4 proxies named
// "<name>-<ordinal>", and its outcome is written back into data.outcome.
// It is what a Connector or a ProxyGroup is to the pipeline, without their
// rules.
type replicated struct {
	kube kubernetes.Interface
}

func (r *replicated) module() pipeline.Module {
	return pipeline.Module{
		ID: "replicated", Resource: configMaps, Kind: "ConfigMap", ParentType: "test", Role: "test-replicated",
		ProxyKind: proxyclassrules.L4,
		IsOurs:    func(obj *unstructured.Unstructured) bool { return obj.GetLabels()["tailplane.test/proxy"] == "true" },
		Plan: func(_ context.Context, obj *unstructured.Unstructured) (*pipeline.Plan, error) {
			n, err := strconv.Atoi(obj.Object["data"].(map[string]any)["replicas"].(string))
			if err != nil || n < 1 {
				return &pipeline.Plan{Invalid: fmt.Sprintf("replicas must be a positive number (%v)", err)}, nil
			}
			var hostnames []string
			for i := range n {
				hostnames = append(hostnames, fmt.Sprintf("%s-%d", obj.GetName(), i))
			}
			return &pipeline.Plan{Hostnames: hostnames, Tags: []string{"tag:k8s"},
				Config: func(i int) (*config.Config, error) {
					return &config.Config{Version: config.Version, Hostname: hostnames[i], Tags: []string{"tag:k8s"},
						Role: config.RoleIngressL4, L4: &config.L4{Ports: []config.PortMap{{Protocol: config.TCP, Port: 80, Target: "127.0.0.1:80"}}}}, nil
				}}, nil
		},
		Report: func(ctx context.Context, obj *unstructured.Unstructured, out pipeline.Outcome) error {
			b, _ := json.Marshal(map[string]any{"data": map[string]string{"outcome": fmt.Sprintf("%d/%d %s", out.Stage, len(out.Serving), out.Message)}})
			_, err := r.kube.CoreV1().ConfigMaps(obj.GetNamespace()).Patch(ctx, obj.GetName(), types.MergePatchType, b, metav1.PatchOptions{})
			return err
		},
		Release: func(context.Context, *unstructured.Unstructured, []proxyset.Device) error { return nil },
	}
}

type fixture struct {
	t          *testing.T
	kube       kubernetes.Interface
	api        *tailnettest.Server
	opNS, ns   string
	cancel     context.CancelFunc
	done       chan error
	parentName string
}

func newFixture(t *testing.T) *fixture {
	f := &fixture{t: t, kube: env.Clientset(t), api: tailnettest.NewServer(), opNS: env.Namespace(t), ns: env.Namespace(t), parentName: "group"}
	t.Cleanup(f.api.Close)
	f.start()
	t.Cleanup(f.stop)
	return f
}

// start runs an operator with only the test module on the pipeline.
func (f *fixture) start() {
	backend, err := tailnet.NewTailscale(tailnet.Options{LoginServer: f.api.URL, ClientID: tailnettest.ClientID, ClientSecret: tailnettest.ClientSecret})
	if err != nil {
		f.t.Fatal(err)
	}
	cfg := env.Config(f.t)
	op, err := runtime.New(cfg, runtime.Settings{HealthAddress: "-", MetricsAddress: "-", Finalizer: "tailscale.com/finalizer",
		MinBackoff: 200 * time.Millisecond, MaxBackoff: 2 * time.Second, Logger: runtime.NewLogger(io.Discard, false)})
	if err != nil {
		f.t.Fatal(err)
	}
	s := settings.Settings{Namespace: f.opNS, ProxyImage: "tailplane-proxy:test", ProxyTags: []string{"tag:k8s"}, Logging: "info"}
	d := cluster.NewDeps(op, kubernetes.NewForConfigOrDie(cfg), dynamic.NewForConfigOrDie(cfg), backend, s, runtime.NewLogger(io.Discard, false))
	d.WatchNamespace = f.ns
	p := pipeline.New(d)
	p.Register(op, (&replicated{kube: f.kube}).module())
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel, f.done = cancel, make(chan error, 1)
	go func() { f.done <- op.Run(ctx) }()
}

func (f *fixture) stop() {
	if f.cancel == nil {
		return
	}
	f.cancel()
	<-f.done
	f.cancel = nil
}

func (f *fixture) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	f.t.Cleanup(cancel)
	return ctx
}

func (f *fixture) names() proxyset.Names {
	return proxyset.Parent{Type: "test", Namespace: f.ns, Name: f.parentName}.Names()
}

func (f *fixture) setReplicas(n int) {
	f.t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: f.parentName, Namespace: f.ns, Labels: map[string]string{"tailplane.test/proxy": "true"}},
		Data: map[string]string{"replicas": strconv.Itoa(n)}}
	_, err := f.kube.CoreV1().ConfigMaps(f.ns).Create(f.ctx(), cm, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		b, _ := json.Marshal(map[string]any{"data": cm.Data})
		_, err = f.kube.CoreV1().ConfigMaps(f.ns).Patch(f.ctx(), f.parentName, types.MergePatchType, b, metav1.PatchOptions{})
	}
	if err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) secret(name string) (*corev1.Secret, error) {
	return f.kube.CoreV1().Secrets(f.opNS).Get(f.ctx(), name, metav1.GetOptions{})
}

// login does what replica i's proxy does once logged in: the control plane
// knows its device (and counts its key as used), and its state Secret
// carries the device keys.
func (f *fixture) login(i int) {
	f.t.Helper()
	r := f.names().Replica(i)
	s, err := f.secret(r.ConfigSecret)
	if err != nil {
		f.t.Fatal(err)
	}
	c, err := config.Parse(s.Data[config.SecretKey])
	if err != nil {
		f.t.Fatal(err)
	}
	f.api.UseKey(c.AuthKey)
	id, fqdn := fmt.Sprintf("n%d", i), c.Hostname+".tail.ts.net"
	f.api.AddDevice(tailnettest.Device{ID: id, Name: fqdn, Addresses: []string{fmt.Sprintf("100.64.0.%d", i+1)}})
	patch, _ := json.Marshal(map[string]any{"data": map[string][]byte{
		proxystate.KeyDeviceID: []byte(id), proxystate.KeyDeviceFQDN: []byte(fqdn + "."), proxystate.KeyDeviceIPs: []byte(`["100.64.0.1"]`)}})
	if _, err := f.kube.CoreV1().Secrets(f.opNS).Patch(f.ctx(), r.StateSecret, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) wantOutcome(want string) {
	f.t.Helper()
	testpoll.Until(f.t, 30*time.Second, "outcome "+want, func() error {
		cm, err := f.kube.CoreV1().ConfigMaps(f.ns).Get(f.ctx(), f.parentName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got := cm.Data["outcome"]; got != want {
			return fmt.Errorf("outcome %q", got)
		}
		return nil
	})
}

func (f *fixture) deviceIDs() []string {
	var ids []string
	for _, d := range f.api.Devices() {
		ids = append(ids, d.ID)
	}
	slices.Sort(ids)
	return ids
}

// A parent with three replicas gets three config Secrets, state Secrets,
// auth keys and devices; scaling it to one deletes the other two devices
// and their Secrets and leaves replica 0 serving; deleting it leaves
// nothing behind.
func TestScaleDownDeletesTheRemovedReplicasDevices(t *testing.T) {
	f := newFixture(t)
	names := f.names()
	f.setReplicas(3)
	testpoll.Until(t, 30*time.Second, "three replicas", func() error {
		sts, err := f.kube.AppsV1().StatefulSets(f.opNS).Get(f.ctx(), names.Base, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if *sts.Spec.Replicas != 3 {
			return fmt.Errorf("StatefulSet replicas %d", *sts.Spec.Replicas)
		}
		for i := range 3 {
			s, err := f.secret(names.Replica(i).ConfigSecret)
			if err != nil {
				return err
			}
			if s.Labels[cluster.LabelHostname] != fmt.Sprintf("group-%d", i) {
				return fmt.Errorf("replica %d hostname label %q", i, s.Labels[cluster.LabelHostname])
			}
			if _, err := f.secret(names.Replica(i).StateSecret); err != nil {
				return err
			}
		}
		return nil
	})
	var descs []string
	for _, k := range f.api.ValidUnusedKeys() {
		descs = append(descs, k.Description)
	}
	slices.Sort(descs)
	want := []string{proxyset.KeyDescription(names.Base, 0), proxyset.KeyDescription(names.Base, 1), proxyset.KeyDescription(names.Base, 2)}
	if !slices.Equal(descs, want) {
		t.Fatalf("auth keys %v, want one per replica %v", descs, want)
	}
	f.wantOutcome("3/0 no Tailscale hostname known yet, waiting for proxy pod to finish auth")
	f.login(0)
	f.login(1)
	f.wantOutcome("3/2 no Tailscale hostname known yet, waiting for proxy pod to finish auth")
	f.login(2)
	f.wantOutcome("4/3 ")

	f.setReplicas(1)
	testpoll.Until(t, 30*time.Second, "replicas 1 and 2 removed", func() error {
		if ids := f.deviceIDs(); !slices.Equal(ids, []string{"n0"}) {
			return fmt.Errorf("devices %v", ids)
		}
		for i := 1; i < 3; i++ {
			for _, name := range []string{names.Replica(i).ConfigSecret, names.Replica(i).StateSecret} {
				if _, err := f.secret(name); !apierrors.IsNotFound(err) {
					return fmt.Errorf("Secret %s: %v", name, err)
				}
			}
		}
		sts, err := f.kube.AppsV1().StatefulSets(f.opNS).Get(f.ctx(), names.Base, metav1.GetOptions{})
		if err != nil || *sts.Spec.Replicas != 1 {
			return fmt.Errorf("StatefulSet %v", err)
		}
		return nil
	})
	if d := f.api.Deleted(); !slices.Equal(d, []string{"n1", "n2"}) && !slices.Equal(d, []string{"n2", "n1"}) {
		t.Fatalf("deleted devices %v, want n1 and n2", d)
	}
	f.wantOutcome("4/1 ")
	if _, err := f.secret(names.Replica(0).StateSecret); err != nil {
		t.Fatalf("replica 0 lost its state: %v", err)
	}

	if err := f.kube.CoreV1().ConfigMaps(f.ns).Delete(f.ctx(), f.parentName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testpoll.Until(t, 30*time.Second, "nothing left", func() error {
		if _, err := f.kube.CoreV1().ConfigMaps(f.ns).Get(f.ctx(), f.parentName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("parent still there (finalizer?): %v", err)
		}
		if ids := f.deviceIDs(); len(ids) != 0 {
			return fmt.Errorf("devices %v", ids)
		}
		list, err := f.kube.CoreV1().Secrets(f.opNS).List(f.ctx(), metav1.ListOptions{LabelSelector: proxystate.LabelManaged + "=true"})
		if err != nil {
			return err
		}
		if len(list.Items) != 0 {
			return fmt.Errorf("%d Secrets left, first %s", len(list.Items), list.Items[0].Name)
		}
		if _, err := f.kube.AppsV1().StatefulSets(f.opNS).Get(f.ctx(), names.Base, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return errors.Join(errors.New("StatefulSet left"), err)
		}
		return nil
	})
	if keys := f.api.ValidUnusedKeys(); len(keys) != 0 {
		t.Fatalf("valid unused keys left: %v", keys)
	}
}
