package proxygroup

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tailplane/tailplane/crds/tailscale/v1alpha1"
	"github.com/tailplane/tailplane/handlers/lib/groupmember"
	"github.com/tailplane/tailplane/handlers/lib/pipeline"
	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/proxy/config"
)

func group(spec v1alpha1.ProxyGroupSpec) *v1alpha1.ProxyGroup {
	return &v1alpha1.ProxyGroup{ObjectMeta: metav1.ObjectMeta{Name: "pg", Generation: 3}, Spec: spec}
}

func TestHostnamesAndReplicas(t *testing.T) {
	if got := hostnames(group(v1alpha1.ProxyGroupSpec{})); strings.Join(got, ",") != "pg-0,pg-1" {
		t.Errorf("default: %v", got)
	}
	three := int32(3)
	if got := hostnames(group(v1alpha1.ProxyGroupSpec{Replicas: &three, HostnamePrefix: "web"})); strings.Join(got, ",") != "web-0,web-1,web-2" {
		t.Errorf("prefix: %v", got)
	}
	zero := int32(0)
	if got := hostnames(group(v1alpha1.ProxyGroupSpec{Replicas: &zero})); len(got) != 0 {
		t.Errorf("zero replicas: %v", got)
	}
}

func TestValidate(t *testing.T) {
	if err := validate(group(v1alpha1.ProxyGroupSpec{Type: "ingress"}), []string{"tag:k8s"}); err != nil {
		t.Errorf("valid group refused: %v", err)
	}
	for _, tc := range []struct {
		spec v1alpha1.ProxyGroupSpec
		want string
	}{
		{v1alpha1.ProxyGroupSpec{Type: "kube-apiserver", KubeAPIServer: &v1alpha1.KubeAPIServerConfig{Hostname: "Bad_"}}, `invalid kubeAPIServer.hostname "Bad_"`},
		{v1alpha1.ProxyGroupSpec{Type: "sideways"}, `unknown ProxyGroup type "sideways"`},
		{v1alpha1.ProxyGroupSpec{Type: "ingress", Tags: v1alpha1.Tags{"nottag"}}, "spec.tags"},
		{v1alpha1.ProxyGroupSpec{Type: "ingress", HostnamePrefix: "Bad_"}, `invalid hostname "Bad_-0"`},
	} {
		if err := validate(group(tc.spec), []string{"tag:k8s"}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: got %v, want %q", tc.spec, err, tc.want)
		}
	}
}

func TestConfigLetsOnlyReplicaZeroIssue(t *testing.T) {
	services := []config.Service{
		{Name: "svc:web", L7: &config.L7{TLS: config.TLS{Mode: config.TLSShared, SecretName: "s"},
			DefaultBackend: &config.Backend{Service: "ns/web:80", Address: "10.0.0.1:80"}}},
		{Name: "svc:db", L4: &config.L4{Ports: []config.PortMap{{Port: 5432, Target: "10.0.0.2:5432"}}}},
	}
	pg := group(v1alpha1.ProxyGroupSpec{Type: "ingress"})
	for i := range 2 {
		c := ingressConfig(pg, services, []string{"tag:k8s"}, i)
		c.LoginServer, c.AuthKey = "https://login", "key" // as pipeline.Render sets them
		if err := c.Validate(); err != nil {
			t.Fatalf("replica %d: %v", i, err)
		}
		if c.Group.Services[0].L7.TLS.Issue != (i == 0) || c.Hostname != hostnames(pg)[i] {
			t.Errorf("replica %d: %+v", i, c.Group.Services[0].L7.TLS)
		}
	}
	if services[0].L7.TLS.Issue {
		t.Error("Config changed its input")
	}
}

func TestStatus(t *testing.T) {
	pg := group(v1alpha1.ProxyGroupSpec{Type: "ingress"})
	one := proxyset.Device{ID: "n1", FQDN: "pg-0.tail.ts.net", IPs: []string{"100.64.0.1"}}
	st := groupStatus(pg, pipeline.Outcome{Stage: pipeline.Pending, Message: "waiting", Serving: []proxyset.Device{one}})
	ready := meta.FindStatusCondition(st.Conditions, v1alpha1.ProxyGroupReady)
	avail := meta.FindStatusCondition(st.Conditions, v1alpha1.ProxyGroupAvailable)
	if ready.Status != "False" || ready.Reason != v1alpha1.ReasonProxyGroupCreating || ready.ObservedGeneration != 3 {
		t.Errorf("ready %+v", ready)
	}
	if avail.Status != "True" || avail.Reason != v1alpha1.ReasonProxyGroupCreating || avail.Message != "1/2 ProxyGroup pods running" {
		t.Errorf("available %+v", avail)
	}
	if len(st.Devices) != 1 || st.Devices[0].Hostname != "pg-0" {
		t.Errorf("devices %+v", st.Devices)
	}
	st = groupStatus(pg, pipeline.Outcome{Stage: pipeline.Ready, Serving: []proxyset.Device{one, one}})
	if avail := meta.FindStatusCondition(st.Conditions, v1alpha1.ProxyGroupAvailable); avail.Reason != v1alpha1.ReasonProxyGroupAvailable {
		t.Errorf("all up: %+v", avail)
	}
	// Every device exists but one replica does not run: not Ready, with
	// the count, as the official operator says it.
	st = groupStatus(pg, pipeline.Outcome{Stage: pipeline.Ready, Serving: []proxyset.Device{one}})
	if ready := meta.FindStatusCondition(st.Conditions, v1alpha1.ProxyGroupReady); ready.Status != "False" ||
		ready.Reason != v1alpha1.ReasonProxyGroupCreating || ready.Message != "1/2 ProxyGroup pods running" {
		t.Errorf("one not running: %+v", ready)
	}
	// Refused: nothing is being created, so neither condition says
	// ProxyGroupCreating "0/2 ProxyGroup pods running".
	st = groupStatus(pg, pipeline.Outcome{Stage: pipeline.Invalid, Message: "invalid ProxyGroup spec: x"})
	for _, c := range st.Conditions {
		if c.Status != "False" || c.Reason != v1alpha1.ReasonProxyGroupInvalid || strings.Contains(c.Message, "0/2") {
			t.Errorf("invalid: %+v", c)
		}
	}
}

// A replica runs only while its current Pod is Ready and its own process
// wrote the Pod's UID: a device left in the state Secret by a deleted or
// restarting Pod does not count.
func TestRunningDevices(t *testing.T) {
	state := func(id, uid string) *corev1.Secret {
		return &corev1.Secret{Data: map[string][]byte{"device_id": []byte(id), "pod_uid": []byte(uid)}}
	}
	pod := func(uid string, ready corev1.ConditionStatus) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid)},
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: ready}}}}
	}
	replica := func(id, stateUID string, p *corev1.Pod) groupmember.ReplicaPod {
		return groupmember.ReplicaPod{Replica: pipeline.Replica{State: state(id, stateUID), Device: proxyset.Device{ID: id}}, Pod: p}
	}
	serving := []proxyset.Device{{ID: "n0"}, {ID: "n1"}, {ID: "n2"}, {ID: "n3"}, {ID: "n4"}}
	terminating := pod("u5", corev1.ConditionTrue)
	terminating.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	got := runningDevices([]groupmember.ReplicaPod{
		replica("n0", "u0", pod("u0", corev1.ConditionTrue)),  // runs
		replica("n1", "old", pod("u1", corev1.ConditionTrue)), // new Pod, process not started
		replica("n2", "u2", nil),                              // Pod gone
		replica("n3", "u3", pod("u3", corev1.ConditionFalse)), // not Ready (waits for control)
		replica("n4", "u4", pod("u4", corev1.ConditionTrue)),  // runs
		replica("n5", "u5", terminating),                      // shutting down
	}, append(serving, proxyset.Device{ID: "n5"}))
	var ids []string
	for _, d := range got {
		ids = append(ids, d.ID)
	}
	if strings.Join(ids, ",") != "n0,n4" {
		t.Errorf("running %v, want n0,n4", ids)
	}
}

func TestProxyClassFallsBackToTheDefault(t *testing.T) {
	if got := proxyClassName(group(v1alpha1.ProxyGroupSpec{}), "dev"); got != "dev" {
		t.Errorf("no class: %q", got)
	}
	if got := proxyClassName(group(v1alpha1.ProxyGroupSpec{ProxyClass: "own"}), "dev"); got != "own" {
		t.Errorf("own class: %q", got)
	}
}

// Of two members that want one Tailscale Service, the older keeps it (the
// first of two as old); the services are sorted by name.
func TestOldestByName(t *testing.T) {
	at := func(name string, sec int64, secret string) groupmember.Hosted {
		return groupmember.Hosted{Service: config.Service{Name: name}, Secrets: []string{secret}, Created: metav1.Unix(sec, 0)}
	}
	got := oldestByName([]groupmember.Hosted{at("svc:web", 20, "new"), at("svc:db", 5, "db"), at("svc:web", 10, "old"), at("svc:web", 10, "tie")})
	var names []string
	for _, h := range got {
		names = append(names, h.Service.Name+"="+h.Secrets[0])
	}
	if strings.Join(names, ",") != "svc:db=db,svc:web=old" {
		t.Errorf("kept %v", names)
	}
}
