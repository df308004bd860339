package proxyclassrules_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/tailplane/tailplane/crds/tailscale/v1alpha1"
	"github.com/tailplane/tailplane/handlers/lib/pipeline"
	"github.com/tailplane/tailplane/handlers/lib/proxyclassrules"
	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/handlers/lib/settings"
	"github.com/tailplane/tailplane/handlers/service"
)

func proxyStatefulSet(t *testing.T) *appsv1.StatefulSet {
	t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-1", Annotations: map[string]string{"tailscale.com/expose": "true"}},
		Spec:       corev1.ServiceSpec{ClusterIP: "10.43.0.10", Ports: []corev1.ServicePort{{Port: 80}}},
	}
	s := settings.Settings{Namespace: "tailscale", ProxyImage: "proxy:1", ProxyTags: []string{"tag:k8s"}}
	objs, err := pipeline.Render(service.Parent(svc), s, service.Plan(svc, s), pipeline.Login{})
	if err != nil {
		t.Fatal(err)
	}
	return objs.StatefulSet
}

func TestValidate(t *testing.T) {
	pc := &v1alpha1.ProxyClass{Spec: v1alpha1.ProxyClassSpec{
		StatefulSet: &v1alpha1.StatefulSet{
			Labels:      v1alpha1.Labels{"bad key!": "v"},
			Annotations: map[string]string{"also bad/key/x": "v"},
			Pod: &v1alpha1.Pod{
				TailscaleContainer:     &v1alpha1.Container{Image: "Not A Valid Image"},
				TailscaleInitContainer: &v1alpha1.Container{Debug: &v1alpha1.Debug{Enable: true}},
			},
		},
		Metrics:         &v1alpha1.Metrics{Enable: true, ServiceMonitor: &v1alpha1.ServiceMonitor{Enable: true}},
		StaticEndpoints: &v1alpha1.StaticEndpointsConfig{NodePort: &v1alpha1.NodePortConfig{Ports: []v1alpha1.PortRange{{Port: 30000, EndPort: 30010}, {Port: 30005}, {Port: 30020, EndPort: 30015}}}},
	}}
	errs := proxyclassrules.Validate(pc, false)
	msg := errs.ToAggregate().Error()
	for _, want := range []string{
		"spec.statefulSet.labels: Invalid value: \"bad key!\"",
		"spec.statefulSet.annotations: Invalid value: \"also bad/key/x\"",
		"spec.statefulSet.pod.tailscaleContainer.image: Invalid value: \"Not A Valid Image\"",
		"spec.statefulSet.pod.tailscaleInitContainer.debug",
		`"servicemonitors.monitoring.coreos.com" CRD was not found`,
		"spec.staticEndpoints.nodePort.ports[1]: Invalid value: \"30005-30005\": overlaps ports[0]",
		"spec.staticEndpoints.nodePort.ports[2].endPort: Invalid value: 30015: endPort must not be below port 30020",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("missing %q in:\n%s", want, msg)
		}
	}
	cond := proxyclassrules.Condition(pc, errs, time.Now())
	if cond.Status != metav1.ConditionFalse || cond.Reason != "ProxyClassInvalid" || !strings.HasPrefix(cond.Message, "ProxyClass is not valid: ") {
		t.Fatalf("condition %+v", cond)
	}

	good := &v1alpha1.ProxyClass{Spec: v1alpha1.ProxyClassSpec{StatefulSet: &v1alpha1.StatefulSet{
		Labels: v1alpha1.Labels{"team": "net"},
		Pod:    &v1alpha1.Pod{TailscaleContainer: &v1alpha1.Container{Image: "ghcr.io/tailplane/tailplane-proxy:v1"}},
	}}}
	if errs := proxyclassrules.Validate(good, false); len(errs) != 0 {
		t.Fatalf("valid class refused: %v", errs)
	}
	if c := proxyclassrules.Condition(good, nil, time.Now()); c.Status != metav1.ConditionTrue || c.Reason != "ProxyClassValid" {
		t.Fatalf("condition %+v", c)
	}
}

// Negative quantities and requests above limits are what the API server
// refuses in a StatefulSet: the ProxyClass is Invalid instead of Valid.
func TestValidateResources(t *testing.T) {
	pc := &v1alpha1.ProxyClass{Spec: v1alpha1.ProxyClassSpec{StatefulSet: &v1alpha1.StatefulSet{Pod: &v1alpha1.Pod{
		TailscaleContainer: &v1alpha1.Container{Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("-100m"), corev1.ResourceMemory: resource.MustParse("2Gi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
		}},
		TailscaleInitContainer: &v1alpha1.Container{Resources: corev1.ResourceRequirements{
			Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("-1")},
		}},
	}}}}
	msg := proxyclassrules.Validate(pc, false).ToAggregate().Error()
	for _, want := range []string{
		`spec.statefulSet.pod.tailscaleContainer.resources.requests[cpu]: Invalid value: "-100m": must be greater than or equal to 0`,
		`spec.statefulSet.pod.tailscaleContainer.resources.requests[memory]: Invalid value: "2Gi": must be less than or equal to memory limit of 1Gi`,
		`spec.statefulSet.pod.tailscaleInitContainer.resources.limits[memory]: Invalid value: "-1": must be greater than or equal to 0`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("missing %q in:\n%s", want, msg)
		}
	}
	ok := &v1alpha1.ProxyClass{Spec: v1alpha1.ProxyClassSpec{StatefulSet: &v1alpha1.StatefulSet{Pod: &v1alpha1.Pod{
		TailscaleContainer: &v1alpha1.Container{Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("1Gi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
		}},
	}}}}
	if errs := proxyclassrules.Validate(ok, false); len(errs) != 0 {
		t.Fatalf("valid resources refused: %v", errs)
	}
}

// Ready and Decided both need the condition of the current generation;
// Decided whichever its status (ProxyClassFor trusts the informer's copy
// only then).
func TestReadyAndDecidedNeedTheCurrentGeneration(t *testing.T) {
	pc := &v1alpha1.ProxyClass{ObjectMeta: metav1.ObjectMeta{Generation: 2}}
	older := proxyclassrules.Condition(&v1alpha1.ProxyClass{ObjectMeta: metav1.ObjectMeta{Generation: 1}}, nil, time.Now())
	invalid := proxyclassrules.Condition(pc, field.ErrorList{field.Invalid(field.NewPath("spec"), "x", "bad")}, time.Now())
	for _, tc := range []struct {
		name           string
		conds          []metav1.Condition
		ready, decided bool
	}{
		{"no condition", nil, false, false},
		{"an older generation's", []metav1.Condition{older}, false, false},
		{"invalid, this generation", []metav1.Condition{invalid}, false, true},
		{"ready, this generation", []metav1.Condition{proxyclassrules.Condition(pc, nil, time.Now())}, true, true},
	} {
		pc.Status.Conditions = tc.conds
		if got := proxyclassrules.Ready(pc); got != tc.ready {
			t.Errorf("%s: Ready = %v, want %v", tc.name, got, tc.ready)
		}
		if got := proxyclassrules.Decided(pc); got != tc.decided {
			t.Errorf("%s: Decided = %v, want %v", tc.name, got, tc.decided)
		}
	}
}

func TestEnvWarnings(t *testing.T) {
	pc := &v1alpha1.ProxyClass{Spec: v1alpha1.ProxyClassSpec{StatefulSet: &v1alpha1.StatefulSet{Pod: &v1alpha1.Pod{TailscaleContainer: &v1alpha1.Container{
		Env: []v1alpha1.Env{{Name: "TS_USERSPACE", Value: "false"}, {Name: "HTTP_PROXY", Value: "x"}, {Name: "experimental_ts_configfile_path"}},
	}}}}}
	got := proxyclassrules.EnvWarnings(pc)
	if len(got) != 2 || !strings.HasPrefix(got[0], "ProxyClass overrides the default value for TS_USERSPACE env var for tailscale container.") {
		t.Fatalf("got %q", got)
	}
}

func env(c corev1.Container) map[string]string {
	m := map[string]string{}
	for _, e := range c.Env {
		if _, dup := m[e.Name]; dup {
			panic("duplicate env " + e.Name)
		}
		m[e.Name] = e.Value
	}
	return m
}

func TestApply(t *testing.T) {
	base := proxyStatefulSet(t)
	dns := corev1.DNSNone
	pc := &v1alpha1.ProxyClass{Spec: v1alpha1.ProxyClassSpec{
		UseLetsEncryptStagingEnvironment: true,
		Metrics:                          &v1alpha1.Metrics{Enable: true},
		StatefulSet: &v1alpha1.StatefulSet{
			Labels:      v1alpha1.Labels{"team": "net", "tailscale.com/managed": "false", "tailplane.dev/proxy-role": "hijack"},
			Annotations: map[string]string{"note": "x"},
			Pod: &v1alpha1.Pod{
				Labels:       v1alpha1.Labels{"app": "hijack", "tier": "edge"},
				NodeSelector: map[string]string{"kubernetes.io/os": "linux"},
				Tolerations:  []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}},
				DNSPolicy:    &dns,
				DNSConfig:    &corev1.PodDNSConfig{Nameservers: []string{"1.1.1.1"}},
				TailscaleContainer: &v1alpha1.Container{
					Image: "mirror/proxy:2", ImagePullPolicy: corev1.PullAlways,
					Env:       []v1alpha1.Env{{Name: "EXTRA", Value: "1"}, {Name: "TS_KUBE_SECRET", Value: "custom"}},
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}},
				},
			},
		},
	}}
	got := proxyclassrules.Apply(base, pc, proxyclassrules.L7)
	if base.Labels["team"] != "" || base.Spec.Template.Spec.Containers[0].Image != "proxy:1" {
		t.Fatal("Apply changed its input")
	}
	if got.Labels["team"] != "net" || got.Labels["tailscale.com/managed"] != "true" || got.Labels["tailscale.com/parent-resource"] != "web" {
		t.Errorf("StatefulSet labels %v", got.Labels)
	}
	if got.Annotations["note"] != "x" {
		t.Errorf("annotations %v", got.Annotations)
	}
	if tl := got.Spec.Template.Labels; tl["app"] != "uid-1" || tl["tier"] != "edge" {
		t.Errorf("pod labels %v: the selector label must be kept", tl)
	}
	// The role tells the modules' proxies apart and finds an egress proxy's
	// Pods for DNSConfig: a class's labels neither remove nor replace it.
	if role := base.Labels[proxyset.LabelProxyRole]; role == "" || got.Labels[proxyset.LabelProxyRole] != role || got.Spec.Template.Labels[proxyset.LabelProxyRole] != role {
		t.Errorf("proxy role %q: StatefulSet has %q, Pod %q", role, got.Labels[proxyset.LabelProxyRole], got.Spec.Template.Labels[proxyset.LabelProxyRole])
	}
	ps := got.Spec.Template.Spec
	if ps.NodeSelector["kubernetes.io/os"] != "linux" || len(ps.Tolerations) != 1 || ps.DNSPolicy != corev1.DNSNone || ps.DNSConfig == nil {
		t.Errorf("pod spec %+v", ps)
	}
	c := ps.Containers[0]
	e := env(c)
	if c.Image != "mirror/proxy:2" || c.ImagePullPolicy != corev1.PullAlways || c.Resources.Requests.Memory().String() != "64Mi" {
		t.Errorf("container %+v", c)
	}
	for k, v := range map[string]string{
		"EXTRA": "1", "TS_KUBE_SECRET": "custom", "TAILPLANE_LOCAL_ADDR": "$(POD_IP):9002",
		"TS_DEBUG_ADDR_PORT": "$(POD_IP):9001", "TS_DEBUG_ACME_DIRECTORY_URL": proxyclassrules.LetsEncryptStagingDirectory,
	} {
		if e[k] != v {
			t.Errorf("env %s = %q, want %q", k, e[k], v)
		}
	}
	var ports []string
	for _, p := range c.Ports {
		ports = append(ports, p.Name)
	}
	if !reflect.DeepEqual(ports, []string{"metrics", "debug"}) {
		t.Errorf("ports %v", ports)
	}

	// Staging only for L7, metrics never for egress.
	l4 := env(proxyclassrules.Apply(base, pc, proxyclassrules.L4).Spec.Template.Spec.Containers[0])
	if _, ok := l4["TS_DEBUG_ACME_DIRECTORY_URL"]; ok {
		t.Error("staging ACME on an L4 proxy")
	}
	egress := env(proxyclassrules.Apply(base, pc, proxyclassrules.Egress).Spec.Template.Spec.Containers[0])
	if _, ok := egress["TAILPLANE_LOCAL_ADDR"]; ok {
		t.Error("metrics on an egress proxy")
	}

	// Pod scheduling fields are replaced wholesale: a class without them
	// clears what an earlier class set.
	bare := &v1alpha1.ProxyClass{Spec: v1alpha1.ProxyClassSpec{StatefulSet: &v1alpha1.StatefulSet{Pod: &v1alpha1.Pod{}}}}
	cleared := proxyclassrules.Apply(got, bare, proxyclassrules.L7).Spec.Template.Spec
	if cleared.NodeSelector != nil || cleared.Tolerations != nil || cleared.DNSPolicy != corev1.DNSNone {
		t.Errorf("after a bare class: %+v", cleared)
	}
	if !reflect.DeepEqual(proxyclassrules.Apply(base, nil, proxyclassrules.L4), base) {
		t.Error("a nil class changed the StatefulSet")
	}
}

func TestNotReadyMessage(t *testing.T) {
	if m := proxyclassrules.NotReadyMessage("fast", nil); !strings.Contains(m, `"fast" does not exist`) {
		t.Error(m)
	}
	if m := proxyclassrules.NotReadyMessage("fast", &v1alpha1.ProxyClass{}); !strings.Contains(m, "is not yet in a ready state") || strings.Contains(m, "(") {
		t.Error(m)
	}
	// An invalid class: its reason and message, quoted.
	invalid := &v1alpha1.ProxyClass{Status: v1alpha1.ProxyClassStatus{Conditions: []metav1.Condition{{Type: v1alpha1.ProxyClassReady,
		Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonProxyClassInvalid, Message: "ProxyClass is not valid: bad image"}}}}
	if m := proxyclassrules.NotReadyMessage("fast", invalid); m != `the ProxyClass "fast" is not yet in a ready state, waiting... (ProxyClassInvalid: ProxyClass is not valid: bad image)` {
		t.Error(m)
	}
}

func TestMetricsServiceAndServiceMonitor(t *testing.T) {
	metrics := &v1alpha1.ProxyClass{Spec: v1alpha1.ProxyClassSpec{Metrics: &v1alpha1.Metrics{Enable: true,
		ServiceMonitor: &v1alpha1.ServiceMonitor{Enable: true, Labels: v1alpha1.Labels{"release": "prometheus"}}}}}
	for _, tc := range []struct {
		pc          *v1alpha1.ProxyClass
		kind        proxyclassrules.ProxyKind
		svc, sm     bool
		description string
	}{
		{nil, proxyclassrules.L4, false, false, "no ProxyClass"},
		{&v1alpha1.ProxyClass{}, proxyclassrules.L7, false, false, "no metrics"},
		{metrics, proxyclassrules.L4, true, true, "metrics and ServiceMonitor"},
		{metrics, proxyclassrules.Egress, false, false, "never on egress proxies"},
		{&v1alpha1.ProxyClass{Spec: v1alpha1.ProxyClassSpec{Metrics: &v1alpha1.Metrics{Enable: true}}}, proxyclassrules.L7, true, false, "metrics only"},
	} {
		if got := proxyclassrules.MetricsWanted(tc.pc, tc.kind); got != tc.svc {
			t.Errorf("%s: MetricsWanted = %v", tc.description, got)
		}
		if got := proxyclassrules.ServiceMonitorWanted(tc.pc, tc.kind); got != tc.sm {
			t.Errorf("%s: ServiceMonitorWanted = %v", tc.description, got)
		}
	}

	sts := proxyStatefulSet(t)
	svc := proxyclassrules.MetricsService(sts)
	if svc.Name != sts.Name+"-metrics" || svc.Namespace != "tailscale" {
		t.Fatalf("metrics Service is %s/%s", svc.Namespace, svc.Name)
	}
	if !reflect.DeepEqual(svc.Spec.Selector, sts.Spec.Selector.MatchLabels) {
		t.Errorf("selector %v, want the proxy Pod's %v", svc.Spec.Selector, sts.Spec.Selector.MatchLabels)
	}
	if p := svc.Spec.Ports; len(p) != 1 || p[0].Name != "metrics" || p[0].Port != 9002 || p[0].TargetPort.StrVal != "metrics" {
		t.Errorf("ports %+v", p)
	}
	for k, want := range map[string]string{
		"tailscale.com/metrics-target": sts.Name, "ts_proxy_type": "ingress_service", "ts_proxy_parent_name": "web",
		"ts_proxy_parent_namespace": "default", "ts_prom_job": "ts_ingress_service_default_web",
		"tailscale.com/parent-resource-type": "svc", "tailscale.com/managed": "true",
	} {
		if svc.Labels[k] != want {
			t.Errorf("label %s = %q, want %q", k, svc.Labels[k], want)
		}
	}

	svc.UID = "uid-metrics"
	sm := proxyclassrules.ServiceMonitor(svc, metrics)
	if sm.GetName() != svc.Name || sm.GetNamespace() != "tailscale" || sm.GetLabels()["release"] != "prometheus" || sm.GetLabels()["ts_prom_job"] == "" {
		t.Errorf("ServiceMonitor metadata %s/%s %v", sm.GetNamespace(), sm.GetName(), sm.GetLabels())
	}
	if owners := sm.GetOwnerReferences(); len(owners) != 1 || owners[0].Kind != "Service" || owners[0].UID != "uid-metrics" {
		t.Errorf("owner references %+v", owners)
	}
	spec := sm.Object["spec"].(map[string]any)
	if spec["jobLabel"] != "ts_prom_job" || !reflect.DeepEqual(spec["namespaceSelector"], map[string]any{"matchNames": []any{"tailscale"}}) ||
		!reflect.DeepEqual(spec["endpoints"], []any{map[string]any{"port": "metrics"}}) {
		t.Errorf("ServiceMonitor spec %v", spec)
	}
}

// The proxy's pod meets the restricted Pod Security Standard (non-root,
// RuntimeDefault seccomp at pod level; no escalation, no capabilities, a
// read-only root in the container), and a ProxyClass with a pod section but
// no securityContext keeps that; one that sets a securityContext replaces it.
func TestApplyKeepsTheRestrictedPodSecurityContext(t *testing.T) {
	base := proxyStatefulSet(t)
	restricted := func(ps corev1.PodSpec) bool {
		sc, c := ps.SecurityContext, ps.Containers[0].SecurityContext
		return sc != nil && sc.RunAsNonRoot != nil && *sc.RunAsNonRoot && sc.SeccompProfile != nil &&
			sc.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault &&
			c != nil && c.AllowPrivilegeEscalation != nil && !*c.AllowPrivilegeEscalation &&
			c.ReadOnlyRootFilesystem != nil && *c.ReadOnlyRootFilesystem &&
			c.Capabilities != nil && len(c.Capabilities.Drop) == 1 && c.Capabilities.Drop[0] == "ALL"
	}
	if !restricted(base.Spec.Template.Spec) {
		t.Fatalf("rendered proxy pod is not restricted: %+v", base.Spec.Template.Spec.SecurityContext)
	}
	envOnly := &v1alpha1.ProxyClass{Spec: v1alpha1.ProxyClassSpec{StatefulSet: &v1alpha1.StatefulSet{Pod: &v1alpha1.Pod{
		TailscaleContainer: &v1alpha1.Container{Env: []v1alpha1.Env{{Name: "X", Value: "1"}}},
	}}}}
	if got := proxyclassrules.Apply(base, envOnly, proxyclassrules.L7); !restricted(got.Spec.Template.Spec) {
		t.Errorf("a ProxyClass without a securityContext dropped the pod's: %+v", got.Spec.Template.Spec.SecurityContext)
	}
	user := int64(1000)
	own := &v1alpha1.ProxyClass{Spec: v1alpha1.ProxyClassSpec{StatefulSet: &v1alpha1.StatefulSet{Pod: &v1alpha1.Pod{
		SecurityContext: &corev1.PodSecurityContext{RunAsUser: &user},
	}}}}
	if sc := proxyclassrules.Apply(base, own, proxyclassrules.L7).Spec.Template.Spec.SecurityContext; sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != 1000 || sc.RunAsNonRoot != nil {
		t.Errorf("the ProxyClass's securityContext was not used as it is: %+v", sc)
	}
}

// The operator's ACME settings reach every proxy container without a
// ProxyClass, and so without its CustomTSEnvVar warning; a ProxyClass that
// names its own directory (env, or Let's Encrypt staging on an L7 proxy)
// wins for its proxies.
func TestOperatorACMEEnv(t *testing.T) {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-1", Annotations: map[string]string{"tailscale.com/expose": "true"}},
		Spec:       corev1.ServiceSpec{ClusterIP: "10.43.0.10", Ports: []corev1.ServicePort{{Port: 80}}},
	}
	s := settings.Settings{Namespace: "tailscale", ProxyImage: "proxy:1", ProxyTags: []string{"tag:k8s"},
		ProxyACME: settings.ACME{DirectoryURL: "https://pebble:14000/dir", CAFile: "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"}}
	objs, err := pipeline.Render(service.Parent(svc), s, service.Plan(svc, s), pipeline.Login{})
	if err != nil {
		t.Fatal(err)
	}
	got := env(objs.StatefulSet.Spec.Template.Spec.Containers[0])
	if got["TS_DEBUG_ACME_DIRECTORY_URL"] != "https://pebble:14000/dir" || got["SSL_CERT_FILE"] != "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt" {
		t.Fatalf("env %v", got)
	}
	empty := &v1alpha1.ProxyClass{}
	if w := proxyclassrules.EnvWarnings(empty); len(w) != 0 {
		t.Fatalf("warnings of an empty ProxyClass: %q", w)
	}
	if got := env(proxyclassrules.Apply(objs.StatefulSet, empty, proxyclassrules.L4).Spec.Template.Spec.Containers[0]); got["TS_DEBUG_ACME_DIRECTORY_URL"] != "https://pebble:14000/dir" {
		t.Fatalf("an empty ProxyClass dropped the operator's directory: %v", got)
	}
	own := &v1alpha1.ProxyClass{Spec: v1alpha1.ProxyClassSpec{StatefulSet: &v1alpha1.StatefulSet{Pod: &v1alpha1.Pod{TailscaleContainer: &v1alpha1.Container{
		Env: []v1alpha1.Env{{Name: "TS_DEBUG_ACME_DIRECTORY_URL", Value: "https://other/dir"}},
	}}}}}
	if got := env(proxyclassrules.Apply(objs.StatefulSet, own, proxyclassrules.L4).Spec.Template.Spec.Containers[0]); got["TS_DEBUG_ACME_DIRECTORY_URL"] != "https://other/dir" || got["SSL_CERT_FILE"] == "" {
		t.Fatalf("with the ProxyClass's own directory: %v", got)
	}
	staging := &v1alpha1.ProxyClass{Spec: v1alpha1.ProxyClassSpec{UseLetsEncryptStagingEnvironment: true}}
	if got := env(proxyclassrules.Apply(objs.StatefulSet, staging, proxyclassrules.L7).Spec.Template.Spec.Containers[0]); got["TS_DEBUG_ACME_DIRECTORY_URL"] != proxyclassrules.LetsEncryptStagingDirectory {
		t.Fatalf("with useLetsEncryptStagingEnvironment: %v", got)
	}
	s.ProxyACME = settings.ACME{}
	if objs, err = pipeline.Render(service.Parent(svc), s, service.Plan(svc, s), pipeline.Login{}); err != nil {
		t.Fatal(err)
	}
	if got := env(objs.StatefulSet.Spec.Template.Spec.Containers[0]); got["TS_DEBUG_ACME_DIRECTORY_URL"] != "" || got["SSL_CERT_FILE"] != "" {
		t.Fatalf("env without ACME settings: %v", got)
	}
}

func TestValidateNodePorts(t *testing.T) {
	pc := &v1alpha1.ProxyClass{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: v1alpha1.ProxyClassSpec{StaticEndpoints: &v1alpha1.StaticEndpointsConfig{
		NodePort: &v1alpha1.NodePortConfig{Ports: []v1alpha1.PortRange{{Port: 30000, EndPort: 30010}, {Port: 30020}}}}}}
	cluster := &v1alpha1.PortRange{Port: 30000, EndPort: 32767}
	if errs := proxyclassrules.ValidateNodePorts(pc, cluster, map[string][]v1alpha1.PortRange{"a": {{Port: 30000}}, "b": {{Port: 30011, EndPort: 30019}}}); len(errs) != 0 {
		t.Fatalf("valid: %v", errs)
	}
	errs := proxyclassrules.ValidateNodePorts(pc, &v1alpha1.PortRange{Port: 30005, EndPort: 32767}, nil)
	if want := `spec.staticEndpoints.nodePort.ports: Invalid value: "30000-30010, 30020": range "30000-30010" is not within Cluster configured range "30005-32767"`; errs.ToAggregate().Error() != want {
		t.Fatalf("out of the cluster's range: %v\nwant %s", errs.ToAggregate(), want)
	}
	errs = proxyclassrules.ValidateNodePorts(pc, nil, map[string][]v1alpha1.PortRange{"c": {{Port: 30100}}, "b": {{Port: 30020, EndPort: 30030}}})
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), `port ranges for ProxyClass "a" clash with existing ProxyClass "b"`) || !proxyclassrules.ClashesWith(errs[0].Error(), "b") {
		t.Fatalf("clash: %v", errs)
	}
}
