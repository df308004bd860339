package chart_test

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/tailplane/tailplane/deploy/chart"
)

// headscale.url with an API key installs the operator for Headscale: no
// OAuth client needed or mounted, the key in Secret operator-headscale at
// /headscale, and HEADSCALE_* env; an existing Secret can hold the key
// instead.
func TestRenderHeadscale(t *testing.T) {
	objs := render(t, map[string]any{"headscale": map[string]any{"url": "https://hs.example.com", "apiKey": "hskey-api-abc"}})
	if objs["Secret/operator-oauth"] != nil {
		t.Error("the OAuth Secret is rendered for Headscale")
	}
	s := objs["Secret/operator-headscale"]
	if s == nil {
		t.Fatal("no Secret operator-headscale")
	}
	if key, _, _ := unstructured.NestedString(s.Object, "stringData", "api_key"); key != "hskey-api-abc" {
		t.Errorf("api_key %q", key)
	}
	d := objs.deployment(t)
	e := env(t, d)
	for name, value := range map[string]string{
		"HEADSCALE_URL": "https://hs.example.com", "HEADSCALE_API_KEY_FILE": "/headscale/api_key", "HEADSCALE_USER": "tailplane", "OPERATOR_LOGIN_SERVER": "",
	} {
		if got := e[name].Value; got != value {
			t.Errorf("env %s = %q, want %q", name, got, value)
		}
	}
	spec := d.Spec.Template.Spec
	if volume(spec.Volumes, "oauth") != nil {
		t.Error("an oauth volume without OAuth values")
	}
	if v := volume(spec.Volumes, "headscale"); v == nil || v.Secret == nil || v.Secret.SecretName != "operator-headscale" {
		t.Errorf("headscale volume %+v", v)
	}
	mounted := false
	for _, m := range spec.Containers[0].VolumeMounts {
		mounted = mounted || (m.Name == "headscale" && m.MountPath == "/headscale")
	}
	if !mounted {
		t.Errorf("mounts %+v", spec.Containers[0].VolumeMounts)
	}

	objs = render(t, map[string]any{"headscale": map[string]any{"url": "https://hs.example.com", "apiKeySecret": "mine", "user": "k8s"}})
	if objs["Secret/operator-headscale"] != nil {
		t.Error("apiKeySecret still renders operator-headscale")
	}
	d = objs.deployment(t)
	if v := volume(d.Spec.Template.Spec.Volumes, "headscale"); v == nil || v.Secret.SecretName != "mine" || env(t, d)["HEADSCALE_USER"].Value != "k8s" {
		t.Errorf("headscale volume %+v, env %+v", v, env(t, d)["HEADSCALE_USER"])
	}
}

func TestBadHeadscaleValuesRejected(t *testing.T) {
	for _, tc := range []struct {
		name string
		vals map[string]any
		want string
	}{
		{"no API key", map[string]any{"headscale": map[string]any{"url": "https://hs.example.com"}}, "headscale.url is set but no API key"},
		{"both keys", map[string]any{"headscale": map[string]any{"url": "https://hs.example.com", "apiKey": "k", "apiKeySecret": "s"}}, "both headscale.apiKey and headscale.apiKeySecret"},
		{"another login server", map[string]any{"loginServer": "https://other.example.com", "headscale": map[string]any{"url": "https://hs.example.com", "apiKey": "k"}}, "loginServer (https://other.example.com) and headscale.url (https://hs.example.com) differ"},
		{"not a URL", map[string]any{"headscale": map[string]any{"url": "hs.example.com", "apiKey": "k"}}, "at '/headscale/url'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := chart.Render(context.Background(), chart.Namespace, tc.vals)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
