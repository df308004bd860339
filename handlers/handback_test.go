package handlers_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tailplane/tailplane/handlers/lib/cluster"
	"github.com/tailplane/tailplane/handlers/lib/pipeline"
	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/handlers/lib/resources"
	"github.com/tailplane/tailplane/handlers/lib/tsservice"
	"github.com/tailplane/tailplane/internal/tailnet/tailnettest"
	"github.com/tailplane/tailplane/internal/testcert"
	"github.com/tailplane/tailplane/internal/testpoll"
)

// officialLookup does what the official operator (v1.102.5,
// cmd/k8s-operator/sts.go) does to find a single proxy's objects: the one
// headless Service with the parent labels, then the Secret named
// "<Service>-0", which it uses as it is when it holds a device_id (no auth
// key is minted). It returns that Secret.
func (h *harness) officialLookup(labels map[string]string) (*corev1.Secret, error) {
	ctx := h.ctx()
	sel := metav1.FormatLabelSelector(metav1.SetAsLabelSelector(labels))
	svcs, err := h.kube.CoreV1().Services(h.opNS).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, err
	}
	if len(svcs.Items) != 1 {
		return nil, fmt.Errorf("%d Services labelled %s, the official operator needs exactly one", len(svcs.Items), sel)
	}
	if svcs.Items[0].Spec.ClusterIP != corev1.ClusterIPNone {
		return nil, fmt.Errorf("Service %s is not headless", svcs.Items[0].Name)
	}
	// Its scale-down reads every Secret with these labels as
	// "<Service>-<ordinal>" (fmt.Sscanf), and fails on another name.
	secrets, err := h.kube.CoreV1().Secrets(h.opNS).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, err
	}
	var state *corev1.Secret
	for i, s := range secrets.Items {
		var ordinal int
		if _, err := fmt.Sscanf(s.Name, svcs.Items[0].Name+"-%d", &ordinal); err != nil {
			return nil, fmt.Errorf("Secret %s labelled %s: the official operator fails on its name: %v", s.Name, sel, err)
		}
		if s.Name == svcs.Items[0].Name+"-0" {
			state = &secrets.Items[i]
		}
	}
	if state == nil {
		return nil, fmt.Errorf("no Secret %s-0 labelled %s", svcs.Items[0].Name, sel)
	}
	return state, nil
}

// A Service's proxy handed back: its Pods stopped, Tailplane's objects
// gone but the state, which is left where the official operator looks,
// with the device's identity and certificate and nothing of Tailplane's;
// no device deleted and no key minted. Handled by Tailplane again (adoption
// on), the same state is taken over as the same device: the hand-back's
// layout is the official one adoption reads.
func TestHandBackToOfficial(t *testing.T) {
	h := newHarness(t, nil)
	h.exposedOnline("web", "nWeb", "100.64.0.9")
	n := h.names("svc", "web")
	fqdn := h.ns + "-web.tail1.ts.net"
	identity := map[string][]byte{"_machinekey": []byte("privkey:web"), "_current-profile": []byte("profile-cd34"),
		"_profiles": []byte(`{"cd34":{}}`), "profile-cd34": []byte(`{"Config":{}}`), fqdn + ".crt": []byte("CERT"), fqdn + ".key": []byte("KEY")}
	patch := map[string]any{"data": maps.Clone(identity)}
	patch["data"].(map[string][]byte)["config_error"] = []byte("a Tailplane-only key")
	raw, _ := json.Marshal(patch)
	if _, err := h.kube.CoreV1().Secrets(h.opNS).Patch(h.ctx(), n.StateSecret, types.MergePatchType, raw, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	keysBefore := len(h.api.Keys())

	h.restartHandingBack(true)
	official := map[string]string{"tailscale.com/managed": "true", "tailscale.com/parent-resource": "web",
		"tailscale.com/parent-resource-ns": h.ns, "tailscale.com/parent-resource-type": "svc"}
	testpoll.Until(t, settle, "proxy handed back", func() error {
		s, err := h.officialLookup(official)
		if err != nil {
			return err
		}
		if !maps.Equal(s.Labels, official) {
			return fmt.Errorf("state Secret %s labels %v, want the official ones only", s.Name, s.Labels)
		}
		for k, v := range identity {
			if string(s.Data[k]) != string(v) {
				return fmt.Errorf("state Secret %s: %s = %q, want %q", s.Name, k, s.Data[k], v)
			}
		}
		if string(s.Data["device_id"]) != "nWeb" {
			return fmt.Errorf("state Secret %s has device_id %q: the official operator would mint a key", s.Name, s.Data["device_id"])
		}
		if _, ok := s.Data["config_error"]; ok {
			return errors.New("Tailplane's own keys left in the state Secret")
		}
		// The runtime's records go too: a later Tailplane starts afresh.
		if cms, err := h.kube.CoreV1().ConfigMaps(h.opNS).List(h.ctx(), metav1.ListOptions{LabelSelector: cluster.StateStorageSelector}); err != nil || len(cms.Items) > 0 {
			return fmt.Errorf("state ConfigMaps left: %v (%v)", cms, err)
		}
		return h.tailplaneObjectsGone(n.Base, n.ConfigSecret)
	})
	h.wantEvent(h.ns, "web", "Normal", pipeline.ReasonHandedBack, "left device "+fqdn+" (node nWeb, 100.64.0.9) for the official operator")
	if gone := h.api.Deleted(); len(gone) != 0 {
		t.Errorf("devices deleted by the hand-back: %v", gone)
	}
	// The service stays the official operator's: its finalizer is the
	// shared one (docs/compatibility.md).
	svc, err := h.kube.CoreV1().Services(h.ns).Get(h.ctx(), "web", metav1.GetOptions{})
	if err != nil || len(svc.Finalizers) != 1 || svc.Finalizers[0] != "tailscale.com/finalizer" {
		t.Errorf("Service after the hand-back: finalizers %v (%v), want tailscale.com/finalizer", svc.Finalizers, err)
	}

	// Back to Tailplane: adopted as the same device, no key minted.
	h.restartHandingBack(false)
	testpoll.Until(t, settle, "handed-back proxy adopted again", func() error {
		s, err := h.kube.CoreV1().Secrets(h.opNS).Get(h.ctx(), n.StateSecret, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if s.Labels["tailplane.dev/proxy-role"] == "" || string(s.Data["_machinekey"]) != "privkey:web" || string(s.Data["device_id"]) != "nWeb" {
			return fmt.Errorf("state Secret %s: labels %v, device %q", s.Name, s.Labels, s.Data["device_id"])
		}
		if _, err := h.kube.CoreV1().Services(h.opNS).Get(h.ctx(), n.Base, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("headless Service %s still there (%v)", n.Base, err)
		}
		return h.proxyExists("svc", "web")
	})
	h.wantCondition("web", "True", "ProxyCreated", "ProxyCreated")
	if keys := len(h.api.Keys()); keys != keysBefore {
		t.Errorf("%d auth keys minted around the hand-back and the adoption", keys-keysBefore)
	}
	if gone := h.api.Deleted(); len(gone) != 0 {
		t.Errorf("devices deleted: %v", gone)
	}
}

// restartHandingBack restarts the operator with OPERATOR_HAND_BACK on or
// off.
func (h *harness) restartHandingBack(on bool) {
	h.stop()
	h.settings.HandBack = on
	h.start()
}

// tailplaneObjectsGone checks that Tailplane's objects of the proxy base
// (but the state Secret) are gone.
func (h *harness) tailplaneObjectsGone(base string, configSecrets ...string) error {
	ctx := h.ctx()
	checks := map[string]error{}
	_, checks["StatefulSet"] = h.kube.AppsV1().StatefulSets(h.opNS).Get(ctx, base, metav1.GetOptions{})
	_, checks["ServiceAccount"] = h.kube.CoreV1().ServiceAccounts(h.opNS).Get(ctx, base, metav1.GetOptions{})
	_, checks["Role"] = h.kube.RbacV1().Roles(h.opNS).Get(ctx, base, metav1.GetOptions{})
	_, checks["RoleBinding"] = h.kube.RbacV1().RoleBindings(h.opNS).Get(ctx, base, metav1.GetOptions{})
	for _, c := range configSecrets {
		_, checks["config Secret "+c] = h.kube.CoreV1().Secrets(h.opNS).Get(ctx, c, metav1.GetOptions{})
	}
	var errs []error
	for what, err := range checks {
		if !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("Tailplane's %s still there (%v)", what, err))
		}
	}
	return errors.Join(errs...)
}

// A ProxyGroup's replicas are handed back under the official names, owned
// by the group: state Secrets "<group>-<ordinal>", and empty config Secrets
// "<group>-<ordinal>-config" so that the official operator mints no key.
func TestHandBackProxyGroup(t *testing.T) {
	h := newHarness(t, nil)
	g := h.proxyGroup(`{"type":"ingress","replicas":2}`)
	ids := []string{g.login(0), g.login(1)}
	for i := range ids {
		g.writeState(i, map[string][]byte{"_machinekey": fmt.Appendf(nil, "privkey:%d", i), "_current-profile": []byte("profile-ef56"), "profile-ef56": []byte("{}")})
	}
	uid := g.get().UID
	// A member Ingress, its Tailscale Service's certificate issued.
	leaf := g.memberWithCertificate("web")
	certPEM := leaf.CertPEM
	h.restartHandingBack(true)
	testpoll.Until(t, settle, "group handed back", func() error {
		var errs []error
		cert, err := h.kube.CoreV1().Secrets(h.opNS).Get(h.ctx(), "web.tail1.ts.net", metav1.GetOptions{})
		wantLabels := map[string]string{"tailscale.com/managed": "true", "tailscale.com/proxy-group": g.name, "tailscale.com/domain": "web.tail1.ts.net",
			"tailscale.com/secret-type": "certs", "tailscale.com/parent-resource-type": "ingress", "tailscale.com/parent-resource": "web",
			"tailscale.com/parent-resource-ns": h.ns}
		if err != nil || !maps.Equal(cert.Labels, wantLabels) || string(cert.Data[corev1.TLSCertKey]) != string(certPEM) {
			errs = append(errs, fmt.Errorf("the official certificate Secret: %v (%v)", cert, err))
		}
		if _, err := h.kube.CoreV1().Secrets(h.opNS).Get(h.ctx(), tsservice.CertSecretName("web"), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("Tailplane's certificate Secret still there (%v)", err))
		}
		for i, id := range ids {
			name := fmt.Sprintf("%s-%d", g.name, i)
			for typ, want := range map[string]string{"state": id, "config": ""} {
				secretName := name
				if typ == "config" {
					secretName += "-config"
				}
				s, err := h.kube.CoreV1().Secrets(h.opNS).Get(h.ctx(), secretName, metav1.GetOptions{})
				if err != nil {
					errs = append(errs, err)
					continue
				}
				l := map[string]string{"tailscale.com/managed": "true", "tailscale.com/parent-resource": g.name,
					"tailscale.com/parent-resource-type": "proxygroup", "tailscale.com/secret-type": typ}
				if !maps.Equal(s.Labels, l) || len(s.OwnerReferences) != 1 || s.OwnerReferences[0].UID != uid {
					errs = append(errs, fmt.Errorf("Secret %s: labels %v, owners %v", s.Name, s.Labels, s.OwnerReferences))
				}
				if string(s.Data["device_id"]) != want || typ == "config" && len(s.Data) > 0 {
					errs = append(errs, fmt.Errorf("Secret %s: data keys %v, device_id %q, want %q", s.Name, slices.Sorted(maps.Keys(s.Data)), s.Data["device_id"], want))
				}
			}
			_, err := h.kube.CoreV1().Secrets(h.opNS).Get(h.ctx(), g.replica(i).StateSecret, metav1.GetOptions{})
			if !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("Tailplane's state Secret %s still there (%v)", g.replica(i).StateSecret, err))
			}
			errs = append(errs, h.tailplaneObjectsGone(g.replica(i).Base, g.replica(i).ConfigSecret))
		}
		return errors.Join(errs...)
	})
	if gone := h.api.Deleted(); len(gone) != 0 {
		t.Errorf("devices deleted by the hand-back: %v", gone)
	}

	// Back to Tailplane: the replicas are adopted one by one, the second
	// once the first is Ready again.
	h.restartHandingBack(false)
	adopted := func(i int) func() error {
		return func() error {
			s, err := h.kube.CoreV1().Secrets(h.opNS).Get(h.ctx(), g.replica(i).StateSecret, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if string(s.Data["device_id"]) != ids[i] {
				return fmt.Errorf("state Secret %s: device %q, want %s", s.Name, s.Data["device_id"], ids[i])
			}
			_, err = h.kube.CoreV1().Secrets(h.opNS).Get(h.ctx(), fmt.Sprintf("%s-%d", g.name, i), metav1.GetOptions{})
			if !apierrors.IsNotFound(err) {
				return fmt.Errorf("official state Secret of replica %d still there (%v)", i, err)
			}
			return nil
		}
	}
	testpoll.Until(t, settle, "replica 0 adopted again", adopted(0))
	testpoll.Until(t, settle, "replica 0's ServiceAccount", func() error {
		_, err := h.kube.CoreV1().ServiceAccounts(h.opNS).Get(h.ctx(), g.replica(0).Base, metav1.GetOptions{})
		return err
	})
	g.pod(0, "10.1.0.10", true)
	testpoll.Until(t, settle, "replica 1 adopted again", adopted(1))
	testpoll.Until(t, settle, "the certificate carried into Tailplane's Secret again", func() error {
		s, err := h.kube.CoreV1().Secrets(h.opNS).Get(h.ctx(), tsservice.CertSecretName("web"), metav1.GetOptions{})
		if err != nil {
			return err
		}
		if string(s.Data[corev1.TLSCertKey]) != string(certPEM) {
			return fmt.Errorf("Secret %s holds another certificate", s.Name)
		}
		return nil
	})
	if gone := h.api.Deleted(); len(gone) != 0 {
		t.Errorf("devices deleted: %v", gone)
	}
}

// With the operator's Deployment there, a hand-back leaves the proxy
// serving until the release is uninstalled: its Pods, config Secret,
// ServiceAccount, Role and RoleBinding are given to the Deployment (the
// garbage collector stops them with it), and its StatefulSet goes leaving
// the Pods; the state is in the official layout all the same.
func TestHandBackKeepsProxyUntilUninstall(t *testing.T) {
	h := newHarness(t, nil)
	dep := h.operatorDeployment()
	n, official := h.webLoggedIn()
	// The proxy's running Pod (no kubelet here: its object).
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: n.StateSecret, Labels: official},
		Spec: corev1.PodSpec{ServiceAccountName: n.Base, AutomountServiceAccountToken: new(false),
			Containers: []corev1.Container{{Name: "proxy", Image: "tailplane-proxy:test"}}}}
	if _, err := h.kube.CoreV1().Pods(h.opNS).Create(h.ctx(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	h.restartHandingBack(true)
	ownedByRelease := func(kind string, obj metav1.Object, err error) error {
		if err != nil {
			return fmt.Errorf("%s: %w", kind, err)
		}
		for _, r := range obj.GetOwnerReferences() {
			if r.UID == dep.UID && r.Kind == "Deployment" {
				return nil
			}
		}
		return fmt.Errorf("%s %s not given to the operator's Deployment: owners %v", kind, obj.GetName(), obj.GetOwnerReferences())
	}
	testpoll.Until(t, settle, "proxy handed back, still running", func() error {
		s, err := h.officialLookup(official)
		if err != nil {
			return err
		}
		if string(s.Data["device_id"]) != "nWeb" || string(s.Data["_machinekey"]) != "privkey:web" {
			return fmt.Errorf("state Secret %s: device %q", s.Name, s.Data["device_id"])
		}
		// Deleted leaving its Pods (orphaned: here no garbage collector
		// runs, so it stays, being deleted).
		sts, err := h.kube.AppsV1().StatefulSets(h.opNS).Get(h.ctx(), n.Base, metav1.GetOptions{})
		if err == nil && (sts.DeletionTimestamp == nil || !slices.Contains(sts.Finalizers, metav1.FinalizerOrphanDependents)) {
			return fmt.Errorf("StatefulSet %s not deleted leaving its Pods (finalizers %v)", sts.Name, sts.Finalizers)
		}
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		ctx := h.ctx()
		p, err := h.kube.CoreV1().Pods(h.opNS).Get(ctx, n.StateSecret, metav1.GetOptions{})
		errs := []error{ownedByRelease("Pod", p, err)}
		c, err := h.kube.CoreV1().Secrets(h.opNS).Get(ctx, n.ConfigSecret, metav1.GetOptions{})
		errs = append(errs, ownedByRelease("config Secret", c, err))
		sa, err := h.kube.CoreV1().ServiceAccounts(h.opNS).Get(ctx, n.Base, metav1.GetOptions{})
		errs = append(errs, ownedByRelease("ServiceAccount", sa, err))
		role, err := h.kube.RbacV1().Roles(h.opNS).Get(ctx, n.Base, metav1.GetOptions{})
		errs = append(errs, ownedByRelease("Role", role, err))
		rb, err := h.kube.RbacV1().RoleBindings(h.opNS).Get(ctx, n.Base, metav1.GetOptions{})
		errs = append(errs, ownedByRelease("RoleBinding", rb, err))
		return errors.Join(errs...)
	})
	if gone := h.api.Deleted(); len(gone) != 0 {
		t.Errorf("devices deleted by the hand-back: %v", gone)
	}
	h.restartHandingBack(false)
}

// A Gateway's proxy has no official layout: a hand-back deletes it with its
// device, and takes Tailplane's finalizer off the Gateway, which no operator
// serves any more (deleting it would hang).
func TestHandBackRemovesAGatewaysProxy(t *testing.T) {
	const class = "tailscale-gw-handback"
	h := newGatewayHarness(t, class, false)
	h.applyYAML(resources.Gateways, h.ns, `
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw}
spec:
  gatewayClassName: `+class+`
  listeners: [{name: http, port: 80, protocol: HTTP}]
`)
	n := proxyset.Parent{Type: "gateway", Namespace: h.ns, Name: "gw"}.Names()
	testpoll.Until(t, settle, "the Gateway's proxy", func() error {
		_, err := h.kube.CoreV1().Secrets(h.opNS).Get(h.ctx(), n.StateSecret, metav1.GetOptions{})
		return err
	})
	h.api.AddDevice(tailnettest.Device{ID: "nGateway", Name: "gw.tail1.ts.net", Addresses: []string{"100.64.0.20"}})
	raw, _ := json.Marshal(map[string]any{"data": map[string][]byte{"device_id": []byte("nGateway"), "device_fqdn": []byte("gw.tail1.ts.net.")}})
	if _, err := h.kube.CoreV1().Secrets(h.opNS).Patch(h.ctx(), n.StateSecret, types.MergePatchType, raw, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}

	h.restartHandingBack(true)
	testpoll.Until(t, settle, "the Gateway's proxy removed", func() error {
		if !slices.Contains(h.api.Deleted(), "nGateway") {
			return fmt.Errorf("device not deleted (deleted: %v)", h.api.Deleted())
		}
		if _, err := h.kube.CoreV1().Secrets(h.opNS).Get(h.ctx(), n.StateSecret, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("state Secret still there (%v)", err)
		}
		gw, err := h.dyn.Resource(resources.Gateways).Namespace(h.ns).Get(h.ctx(), "gw", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if f := gw.GetFinalizers(); len(f) > 0 {
			return fmt.Errorf("Gateway finalizers %v", f)
		}
		return nil
	})
}

// A hand-back cut off part-way (the operator stopped after it made the
// official headless Service, before the state Secret was rewritten) is
// finished by the next start: one headless Service, the state in the
// official layout, the device kept.
func TestHandBackCutOffIsFinished(t *testing.T) {
	h := newHarness(t, nil)
	n, official := h.webLoggedIn()
	h.stop()
	headless := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: n.Base, Labels: official},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone}}
	if _, err := h.kube.CoreV1().Services(h.opNS).Create(h.ctx(), headless, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.settings.HandBack = true
	h.start()
	testpoll.Until(t, settle, "cut-off hand-back finished", func() error {
		s, err := h.officialLookup(official)
		if err != nil {
			return err
		}
		if !maps.Equal(s.Labels, official) || string(s.Data["device_id"]) != "nWeb" || string(s.Data["_machinekey"]) != "privkey:web" {
			return fmt.Errorf("state Secret %s: labels %v, device %q", s.Name, s.Labels, s.Data["device_id"])
		}
		return h.tailplaneObjectsGone(n.Base, n.ConfigSecret)
	})
	if gone := h.api.Deleted(); len(gone) != 0 {
		t.Errorf("devices deleted: %v", gone)
	}
	h.restartHandingBack(false)
}

// operatorDeployment creates the operator's Deployment "operator" (no Pod
// runs here), which a hand-back gives the running proxies to.
func (h *harness) operatorDeployment() *appsv1.Deployment {
	h.t.Helper()
	replicas := int32(0)
	sel := map[string]string{"app": "tailplane-operator"}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "operator"}, Spec: appsv1.DeploymentSpec{Replicas: &replicas,
		Selector: &metav1.LabelSelector{MatchLabels: sel}, Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "operator", Image: "tailplane-operator:test"}}}}}}
	dep, err := h.kube.AppsV1().Deployments(h.opNS).Create(h.ctx(), dep, metav1.CreateOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return dep
}

// ownedBy reports whether obj is given to the owner of UID uid.
func ownedBy(obj metav1.Object, uid types.UID) bool {
	return slices.ContainsFunc(obj.GetOwnerReferences(), func(r metav1.OwnerReference) bool { return r.UID == uid })
}

// A group's replicas serve on until the release goes, too: each keeps its
// own state Secret (no longer a proxy's, labelled with the official copy
// it was written to) and the Tailscale Service's certificate, all given to
// the operator's Deployment; the official Secrets are written as without
// one. Handing back again (a restart) changes nothing.
func TestHandBackKeepsGroupUntilUninstall(t *testing.T) {
	h := newHarness(t, nil)
	dep := h.operatorDeployment()
	g := h.proxyGroup(`{"type":"ingress","replicas":1}`)
	id := g.login(0)
	g.writeState(0, map[string][]byte{"_machinekey": []byte("privkey:0"), "_current-profile": []byte("profile-ef56")})
	g.memberWithCertificate("web")
	kept := func() error {
		ctx := h.ctx()
		official, err := h.kube.CoreV1().Secrets(h.opNS).Get(ctx, g.name+"-0", metav1.GetOptions{})
		if err != nil || string(official.Data["device_id"]) != id {
			return fmt.Errorf("official state Secret: %v (%v)", official, err)
		}
		own, err := h.kube.CoreV1().Secrets(h.opNS).Get(ctx, g.replica(0).StateSecret, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("the replica's own state Secret: %w", err)
		}
		if want := map[string]string{pipeline.LabelHandedBackTo: g.name + "-0"}; !maps.Equal(own.Labels, want) || !ownedBy(own, dep.UID) ||
			string(own.Data["device_id"]) != id {
			return fmt.Errorf("the replica's own state Secret: labels %v, owners %v", own.Labels, own.OwnerReferences)
		}
		cert, err := h.kube.CoreV1().Secrets(h.opNS).Get(ctx, tsservice.CertSecretName("web"), metav1.GetOptions{})
		if err != nil || !ownedBy(cert, dep.UID) || len(cert.OwnerReferences) != 1 {
			return fmt.Errorf("Tailplane's certificate Secret: %v (%v)", cert, err)
		}
		if _, err := h.kube.CoreV1().Secrets(h.opNS).Get(ctx, "web.tail1.ts.net", metav1.GetOptions{}); err != nil {
			return fmt.Errorf("the official certificate Secret: %w", err)
		}
		return nil
	}
	h.restartHandingBack(true)
	testpoll.Until(t, settle, "group handed back, still serving", kept)
	h.restartHandingBack(true)
	testpoll.Until(t, settle, "handed back again: the same", kept)
	if gone := h.api.Deleted(); len(gone) != 0 {
		t.Errorf("devices deleted by the hand-back: %v", gone)
	}
	// Taken back by Tailplane before any uninstall: the kept state Secret
	// is Tailplane's again, and no longer the Deployment's.
	h.restartHandingBack(false)
	testpoll.Until(t, settle, "the group adopted again", func() error {
		own, err := h.kube.CoreV1().Secrets(h.opNS).Get(h.ctx(), g.replica(0).StateSecret, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if _, kept := own.Labels[pipeline.LabelHandedBackTo]; kept || own.Labels["tailplane.dev/proxy-role"] == "" || ownedBy(own, dep.UID) ||
			string(own.Data["device_id"]) != id {
			return fmt.Errorf("state Secret %s: labels %v, owners %v", own.Name, own.Labels, own.OwnerReferences)
		}
		_, err = h.kube.CoreV1().Secrets(h.opNS).Get(h.ctx(), g.name+"-0", metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("official state Secret still there (%v)", err)
		}
		return nil
	})
}

// webLoggedIn makes the exposed Service "web" and has its proxy log in as
// device nWeb with a node identity; it returns the proxy's names and the
// parent labels the official operator finds its objects by.
func (h *harness) webLoggedIn() (proxyset.Names, map[string]string) {
	h.t.Helper()
	h.exposedOnline("web", "nWeb", "100.64.0.9")
	n := h.names("svc", "web")
	raw, _ := json.Marshal(map[string]any{"data": map[string][]byte{"_machinekey": []byte("privkey:web"), "_current-profile": []byte("profile-cd34")}})
	if _, err := h.kube.CoreV1().Secrets(h.opNS).Patch(h.ctx(), n.StateSecret, types.MergePatchType, raw, metav1.PatchOptions{}); err != nil {
		h.t.Fatal(err)
	}
	return n, map[string]string{"tailscale.com/managed": "true", "tailscale.com/parent-resource": "web",
		"tailscale.com/parent-resource-ns": h.ns, "tailscale.com/parent-resource-type": "svc"}
}

// memberWithCertificate makes the Ingress name a member of the group and
// issues its Tailscale Service's certificate (for <name>.tail1.ts.net)
// into the shared certificate Secret, as the group's issuing replica does.
func (g *groupFixture) memberWithCertificate(name string) *testcert.Leaf {
	g.t.Helper()
	g.backend(name, 80)
	g.createIngress(name, map[string]string{"tailscale.com/proxy-group": g.name},
		networkingv1.IngressSpec{DefaultBackend: defaultBackend(name, 80), TLS: tlsHost(name)})
	leaf := testcert.NewCA(g.t).Issue(g.t, 2, time.Now().Add(24*time.Hour), name+".tail1.ts.net")
	testpoll.Until(g.t, settle, "the member's certificate Secret", func() error {
		s, err := g.kube.CoreV1().Secrets(g.opNS).Get(g.ctx(), tsservice.CertSecretName(name), metav1.GetOptions{})
		if err != nil {
			return err
		}
		s.Data = map[string][]byte{corev1.TLSCertKey: leaf.CertPEM, corev1.TLSPrivateKeyKey: leaf.KeyPEM}
		_, err = g.kube.CoreV1().Secrets(g.opNS).Update(g.ctx(), s, metav1.UpdateOptions{})
		return err
	})
	return leaf
}
