package official

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"
)

var devclusterEnv = TailnetEnv{
	"TS_API_CLIENT_ID": "id-1", "TS_API_CLIENT_SECRET": "secret-1", "TS_CONTROL_URL": "https://198.19.0.1",
	"TS_DEBUG_ACME_DIRECTORY_URL": "https://198.19.0.1:14000/dir", "TS_ACME_CA_FILE": "/d/acme-ca.pem",
	"TS_POD_ACME_CA_FILE": "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt",
}

// The official chart from the pinned module renders with the harness's
// values into an operator that uses devcluster's tailnet, the images the
// harness built (never pulled), its own hostname, the IngressClass tailscale,
// nftables and the official ProxyClass.
func TestOfficialChartRendersWithTheValues(t *testing.T) {
	ctx := context.Background()
	dir, err := ChartDir(ctx, "tools")
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := RenderChart(ctx, dir, OfficialNamespace, OfficialValues(devclusterEnv))
	if err != nil {
		t.Fatal(err)
	}
	var dep *appsv1.Deployment
	for doc := range strings.SplitSeq(manifest, "\n---") {
		if strings.Contains(doc, "kind: Deployment") {
			dep = new(appsv1.Deployment)
			if err := yaml.Unmarshal([]byte(doc), dep); err != nil {
				t.Fatal(err)
			}
		}
	}
	if dep == nil {
		t.Fatalf("no Deployment in the rendered chart:\n%s", manifest)
	}
	if dep.Namespace != OfficialNamespace {
		t.Errorf("Deployment namespace %q, want %s", dep.Namespace, OfficialNamespace)
	}
	c := dep.Spec.Template.Spec.Containers[0]
	if c.Image != "tailscale/k8s-operator:"+OfficialVersion || c.ImagePullPolicy != "IfNotPresent" {
		t.Errorf("operator image %s (%s), want tailscale/k8s-operator:%s (IfNotPresent)", c.Image, c.ImagePullPolicy, OfficialVersion)
	}
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	for k, want := range map[string]string{
		"OPERATOR_LOGIN_SERVER": "https://198.19.0.1", "OPERATOR_INGRESS_CLASS_NAME": OfficialClass,
		"OPERATOR_HOSTNAME": OfficialHostname, "PROXY_IMAGE": "tailscale/tailscale:" + OfficialVersion,
		"PROXY_FIREWALL_MODE": "nftables", "PROXY_DEFAULT_CLASS": OfficialProxyClass,
		"SSL_CERT_FILE": devclusterEnv["TS_POD_ACME_CA_FILE"],
	} {
		if env[k] != want {
			t.Errorf("operator env %s = %q, want %q", k, env[k], want)
		}
	}
	if !strings.Contains(manifest, "client_secret: secret-1") && !strings.Contains(manifest, `client_secret: "secret-1"`) {
		t.Error("the OAuth Secret does not hold devcluster's client secret")
	}
	if strings.Contains(manifest, "kind: CustomResourceDefinition") {
		t.Error("the official chart installed CRDs; Tailplane's chart owns them in the side-by-side run")
	}
	if filepath.Base(filepath.Dir(filepath.Dir(dir))) != "k8s-operator" {
		t.Errorf("chart dir %s is not cmd/k8s-operator/deploy/chart", dir)
	}
}

// Tailplane's values move it to the tailplane classes, and leave the CA
// file to devinstall's chart value (no SSL_CERT_FILE in extraEnv, which
// would replace it); the official ProxyClass never pulls an image.
func TestTailplaneValuesAndProxyClass(t *testing.T) {
	v := TailplaneValues()
	if got := v["ingressClass"].(map[string]any)["name"]; got != TailplaneClass {
		t.Errorf("IngressClass %v, want %s", got, TailplaneClass)
	}
	env := map[string]string{}
	for _, e := range v["operatorConfig"].(map[string]any)["extraEnv"].([]any) {
		m := e.(map[string]any)
		env[m["name"].(string)] = m["value"].(string)
	}
	if _, ok := env["SSL_CERT_FILE"]; env["OPERATOR_LOAD_BALANCER_CLASS"] != TailplaneClass || ok || v["proxyConfig"] != nil {
		t.Errorf("Tailplane's extra env %v", env)
	}
	pc, err := yaml.Marshal(ProxyClass(devclusterEnv))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"name: official", "imagePullPolicy: IfNotPresent", "TS_DEBUG_ACME_DIRECTORY_URL", "value: https://198.19.0.1:14000/dir"} {
		if !strings.Contains(string(pc), want) {
			t.Errorf("ProxyClass lacks %q:\n%s", want, pc)
		}
	}
}
