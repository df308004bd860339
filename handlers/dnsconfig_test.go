package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/tailplane/tailplane/handlers/dnsconfig"
	"github.com/tailplane/tailplane/handlers/lib/resources"
	"github.com/tailplane/tailplane/internal/nameserver"
	"github.com/tailplane/tailplane/internal/testenv"
	"github.com/tailplane/tailplane/internal/testpoll"
)

// wantNameserverReady waits for a DNSConfig's NameserverReady condition
// (and, when ip is not empty, status.nameserver.ip).
func (h *harness) wantNameserverReady(name, status, reason, ip string) {
	h.t.Helper()
	testpoll.Until(h.t, settle, "NameserverReady of "+name, func() error {
		obj, err := h.dyn.Resource(resources.DNSConfigs).Get(h.ctx(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		got, _, _ := unstructured.NestedString(obj.Object, "status", "nameserver", "ip")
		conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
		for _, c := range conds {
			m := c.(map[string]any)
			if m["type"] == "NameserverReady" && m["status"] == status && m["reason"] == reason && (ip == "" || got == ip) {
				return nil
			}
		}
		return fmt.Errorf("conditions %v, nameserver.ip %q", conds, got)
	})
}

// records reads the nameserver's records from the dnsrecords ConfigMap.
func (h *harness) records() (nameserver.Records, string, error) {
	cm, err := h.kube.CoreV1().ConfigMaps(h.opNS).Get(h.ctx(), nameserver.ConfigMapName, metav1.GetOptions{})
	if err != nil {
		return nameserver.Records{}, "", err
	}
	var r nameserver.Records
	data := cm.Data[nameserver.RecordsKey]
	if err := json.Unmarshal([]byte(data), &r); err != nil {
		return r, data, fmt.Errorf("records.json %q: %w", data, err)
	}
	return r, data, nil
}

func (h *harness) wantRecord(name string, ips ...string) {
	h.t.Helper()
	testpoll.Until(h.t, settle, fmt.Sprintf("record %s -> %v", name, ips), func() error {
		r, data, err := h.records()
		if err != nil {
			return err
		}
		if r.Version != nameserver.Version || !slices.Equal(r.IP4[name], ips) {
			return fmt.Errorf("records.json %s", data)
		}
		return nil
	})
}

// proxyPod stands in for replica 0 of a proxy's StatefulSet (no kubelet
// here): a Pod with the template's labels, its readiness and IP.
func (h *harness) proxyPod(parentType, name, ip string, ready bool) {
	h.t.Helper()
	n := h.names(parentType, name)
	pods := h.kube.CoreV1().Pods(h.opNS)
	p, err := pods.Get(h.ctx(), n.StateSecret, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		sts, serr := h.kube.AppsV1().StatefulSets(h.opNS).Get(h.ctx(), n.Base, metav1.GetOptions{})
		if serr != nil {
			h.t.Fatal(serr)
		}
		p, err = pods.Create(h.ctx(), &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: n.StateSecret, Labels: sts.Spec.Template.Labels},
			Spec: corev1.PodSpec{ServiceAccountName: n.Base, AutomountServiceAccountToken: new(false),
				Containers: []corev1.Container{{Name: "tailscale", Image: "x"}}},
		}, metav1.CreateOptions{})
		h.t.Cleanup(func() { _ = pods.Delete(context.Background(), n.StateSecret, metav1.DeleteOptions{}) })
	}
	if err != nil {
		h.t.Fatal(err)
	}
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	p.Status.PodIP, p.Status.PodIPs = ip, []corev1.PodIP{{IP: ip}}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}
	if _, err := pods.UpdateStatus(h.ctx(), p, metav1.UpdateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

// A DNSConfig runs the nameserver in the operator namespace (with the
// operator's own RBAC), reports the Service's ClusterIP, keeps the records
// of the proxies' MagicDNS names current as their Pods come, move and stop
// being ready, follows its spec, tells two DNSConfigs apart, and takes the
// nameserver away when deleted. The records the operator writes are then
// answered over DNS by the nameserver.
func TestDNSConfigRunsTheNameserverWithCurrentRecords(t *testing.T) {
	h := newHarnessOpts(t, true, nil)
	name := "dns-" + h.ns
	h.createClusterCR(resources.DNSConfigs, "DNSConfig", name, `{"nameserver":{}}`)

	var ip string
	testpoll.Until(t, settle, "nameserver objects", func() error {
		d, err := h.kube.AppsV1().Deployments(h.opNS).Get(h.ctx(), dnsconfig.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if c := d.Spec.Template.Spec.Containers[0]; c.Image != h.settings.ProxyImage || !slices.Equal(c.Args, []string{"nameserver"}) {
			return fmt.Errorf("container %s %v", c.Image, c.Args)
		}
		if _, err := h.kube.CoreV1().ServiceAccounts(h.opNS).Get(h.ctx(), dnsconfig.Name, metav1.GetOptions{}); err != nil {
			return err
		}
		svc, err := h.kube.CoreV1().Services(h.opNS).Get(h.ctx(), dnsconfig.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		ip = svc.Spec.ClusterIP
		_, _, err = h.records()
		return err
	})
	h.wantNameserverReady(name, "True", dnsconfig.ReasonCreated, ip)
	h.wantEvent("default", name, corev1.EventTypeNormal, dnsconfig.ReasonCreated, ip)

	// An egress Service to a tailnet FQDN: its name resolves to the proxy
	// Pod once it is ready, follows the Pod's new IP, and goes when the Pod
	// is not ready.
	h.createService(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "db",
		Annotations: map[string]string{"tailscale.com/tailnet-fqdn": "db.tail1.ts.net"}}})
	testpoll.Until(t, settle, "egress proxy", func() error { return h.proxyExists("egress", "db") })
	h.proxyPod("egress", "db", "10.244.0.7", true)
	h.wantRecord("db.tail1.ts.net", "10.244.0.7")
	h.proxyPod("egress", "db", "10.244.0.8", true)
	h.wantRecord("db.tail1.ts.net", "10.244.0.8")

	// A tailscale Ingress: its MagicDNS name once its device has one.
	h.createIngressClass(false)
	h.backend("web", 8080)
	h.createIngress("site", nil, networkingv1.IngressSpec{DefaultBackend: defaultBackend("web", 8080),
		TLS: []networkingv1.IngressTLS{{Hosts: []string{"site"}}}})
	testpoll.Until(t, settle, "ingress proxy", func() error { return h.proxyExists("ingress", "site") })
	h.simulateLogin("ingress", "site", "nSITE", "site.tail1.ts.net", "100.64.0.10")
	testpoll.Until(t, settle, "Ingress hostname", func() error {
		ing, err := h.kube.NetworkingV1().Ingresses(h.ns).Get(h.ctx(), "site", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if lb := ing.Status.LoadBalancer.Ingress; len(lb) == 0 || lb[0].Hostname != "site.tail1.ts.net" {
			return fmt.Errorf("status %+v", ing.Status)
		}
		return nil
	})
	h.proxyPod("ingress", "site", "10.244.0.9", true)
	h.wantRecord("site.tail1.ts.net", "10.244.0.9")

	// The nameserver answers what the operator wrote, over UDP and TCP.
	_, data, err := h.records()
	if err != nil {
		t.Fatal(err)
	}
	addr := serveRecords(t, data)
	for _, network := range []string{"udp", "tcp"} {
		m := new(dns.Msg)
		m.SetQuestion("db.tail1.ts.net.", dns.TypeA)
		r, _, err := (&dns.Client{Net: network, Timeout: 2 * time.Second}).Exchange(m, addr)
		if err != nil || r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != "10.244.0.8" {
			t.Fatalf("%s query of db.tail1.ts.net: %v %v, want 10.244.0.8", network, r, err)
		}
	}

	h.proxyPod("egress", "db", "10.244.0.8", false)
	h.wantRecord("db.tail1.ts.net")
	h.wantRecord("site.tail1.ts.net", "10.244.0.9")

	// The spec is followed.
	h.patchSpec(resources.DNSConfigs, name, `{"nameserver":{"replicas":2,"image":{"repo":"tailscale/k8s-nameserver","tag":"v1.102.5"}}}`)
	testpoll.Until(t, settle, "Deployment follows the spec", func() error {
		d, err := h.kube.AppsV1().Deployments(h.opNS).Get(h.ctx(), dnsconfig.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if *d.Spec.Replicas != 2 || d.Spec.Template.Spec.Containers[0].Image != "tailscale/k8s-nameserver:v1.102.5" {
			return fmt.Errorf("replicas %d image %s", *d.Spec.Replicas, d.Spec.Template.Spec.Containers[0].Image)
		}
		return nil
	})

	// A second DNSConfig: both say there are two; deleting it makes the
	// first one ready again.
	second := "dns2-" + h.ns
	h.createClusterCR(resources.DNSConfigs, "DNSConfig", second, `{"nameserver":{}}`)
	h.wantNameserverReady(second, "False", dnsconfig.ReasonMultiple, "")
	h.wantNameserverReady(name, "False", dnsconfig.ReasonMultiple, "")
	h.wantEvent("default", second, corev1.EventTypeWarning, dnsconfig.ReasonMultiple, "Multiple DNSConfig")
	if err := h.dyn.Resource(resources.DNSConfigs).Delete(h.ctx(), second, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.wantNameserverReady(name, "True", dnsconfig.ReasonCreated, ip)

	// Deleting the DNSConfig removes the nameserver.
	if err := h.dyn.Resource(resources.DNSConfigs).Delete(h.ctx(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testpoll.Until(t, settle, "nameserver objects gone", func() error {
		checks := map[string]error{}
		_, checks["Deployment"] = h.kube.AppsV1().Deployments(h.opNS).Get(h.ctx(), dnsconfig.Name, metav1.GetOptions{})
		_, checks["Service"] = h.kube.CoreV1().Services(h.opNS).Get(h.ctx(), dnsconfig.Name, metav1.GetOptions{})
		_, checks["ServiceAccount"] = h.kube.CoreV1().ServiceAccounts(h.opNS).Get(h.ctx(), dnsconfig.Name, metav1.GetOptions{})
		_, checks["ConfigMap"] = h.kube.CoreV1().ConfigMaps(h.opNS).Get(h.ctx(), nameserver.ConfigMapName, metav1.GetOptions{})
		for what, err := range checks {
			if !apierrors.IsNotFound(err) {
				return fmt.Errorf("%s still there (%v)", what, err)
			}
		}
		return nil
	})
}

// serveRecords runs the nameserver on loopback with records.json data.
func serveRecords(t *testing.T, data string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), nameserver.RecordsKey)
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	pc, ln := testenv.ListenUDPAndTCP(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- (&nameserver.Server{Path: path}).Serve(ctx, pc, ln) }()
	t.Cleanup(func() { cancel(); <-done })
	return pc.LocalAddr().String()
}
