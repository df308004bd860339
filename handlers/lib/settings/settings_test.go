package settings_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/tailplane/tailplane/handlers/lib/settings"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestDefaults(t *testing.T) {
	s, err := settings.FromEnv(env(map[string]string{"OPERATOR_NAMESPACE": "tailscale"}))
	if err != nil {
		t.Fatal(err)
	}
	want := settings.Settings{
		Namespace: "tailscale", ClientIDFile: "/oauth/client_id", ClientSecretFile: "/oauth/client_secret", IDTokenFile: settings.DefaultIDTokenFile, ServiceAccount: settings.DefaultServiceAccount,
		ProxyImage: settings.DefaultProxyImage, ProxyTags: []string{"tag:k8s"}, IngressClassName: "tailscale", LoadBalancerClass: "tailscale", Logging: "info",
		OperatorHostname: "tailscale-operator", OperatorInitialTags: []string{"tag:k8s-operator"}, AdoptOfficial: settings.AdoptOn,
	}
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("got %+v\nwant %+v", s, want)
	}
}

func TestOfficialNames(t *testing.T) {
	s, err := settings.FromEnv(env(map[string]string{
		"OPERATOR_NAMESPACE": "ts", "OPERATOR_LOGIN_SERVER": "https://hs.example.com/", "PROXY_IMAGE": "reg/proxy:v1",
		"PROXY_TAGS": "tag:a, tag:b,", "OPERATOR_INGRESS_CLASS_NAME": "tailnet", "PROXY_DEFAULT_CLASS": "default",
		"OPERATOR_DEFAULT_LOAD_BALANCER": "true", "CLIENT_ID_FILE": "/x/id", "CLIENT_SECRET_FILE": "/x/secret", "OPERATOR_LOGGING": "debug",
		"OPERATOR_HOSTNAME": "ts-op", "OPERATOR_INITIAL_TAGS": "tag:op,tag:infra", "OPERATOR_SECRET": "operator", "TS_PORT": "41641",
		"OPERATOR_LOAD_BALANCER_CLASS": "tailplane", "OPERATOR_ADOPT_OFFICIAL": "dry-run", "OPERATOR_HAND_BACK": "true",
		"PROXY_ACME_DIRECTORY_URL": " https://acme.example.com:14000/dir ", "PROXY_ACME_CA_FILE": "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt",
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := settings.Settings{
		Namespace: "ts", LoginServer: "https://hs.example.com", ClientIDFile: "/x/id", ClientSecretFile: "/x/secret", IDTokenFile: settings.DefaultIDTokenFile, ServiceAccount: settings.DefaultServiceAccount,
		ProxyImage: "reg/proxy:v1", ProxyTags: []string{"tag:a", "tag:b"}, IngressClassName: "tailnet",
		LoadBalancerClass: "tailplane", DefaultProxyClass: "default", DefaultLoadBalancer: true, Logging: "debug",
		OperatorHostname: "ts-op", OperatorInitialTags: []string{"tag:op", "tag:infra"}, OperatorSecret: "operator", OperatorPort: 41641,
		ProxyACME:     settings.ACME{DirectoryURL: "https://acme.example.com:14000/dir", CAFile: "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"},
		AdoptOfficial: settings.AdoptDryRun, HandBack: true,
	}
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("got %+v\nwant %+v", s, want)
	}
}

func TestBadValuesAreAllReported(t *testing.T) {
	_, err := settings.FromEnv(env(map[string]string{
		"OPERATOR_NAMESPACE": "ts", "PROXY_TAGS": "k8s,tag:1x", "OPERATOR_DEFAULT_LOAD_BALANCER": "maybe", "OPERATOR_LOGGING": "loud",
		"OPERATOR_HOSTNAME": "tailscale_operator", "OPERATOR_INITIAL_TAGS": "k8s-operator", "TS_PORT": "70000",
		"PROXY_ACME_DIRECTORY_URL": "acme.example.com/dir", "PROXY_ACME_CA_FILE": "certs/ca.pem", "OPERATOR_ADOPT_OFFICIAL": "yes",
		"OPERATOR_HAND_BACK": "later",
	}))
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{
		`PROXY_TAGS: invalid tag "k8s": tags must start with 'tag:'`,
		`invalid tag "tag:1x": tag names must start with a letter, after 'tag:'`,
		`OPERATOR_DEFAULT_LOAD_BALANCER: "maybe" is not a boolean`,
		`OPERATOR_LOGGING: "loud" is not one of info, debug, dev`,
		`OPERATOR_HOSTNAME: "tailscale_operator" is not a valid DNS label: contains invalid character '_'`,
		`OPERATOR_INITIAL_TAGS: invalid tag "k8s-operator": tags must start with 'tag:'`,
		`TS_PORT: "70000" is not a UDP port number`,
		`PROXY_ACME_DIRECTORY_URL: "acme.example.com/dir" is not an http(s) URL of an ACME directory`,
		`PROXY_ACME_CA_FILE: "certs/ca.pem" is not an absolute path`,
		`OPERATOR_ADOPT_OFFICIAL: "yes" is not one of on, dry-run, off`,
		`OPERATOR_HAND_BACK: "later" is not a boolean`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

// HEADSCALE_URL selects Headscale: it is the login server, the key file and
// user have defaults, and OPERATOR_LOGIN_SERVER may only repeat it.
func TestHeadscaleSettings(t *testing.T) {
	s, err := settings.FromEnv(env(map[string]string{"OPERATOR_NAMESPACE": "ts", "HEADSCALE_URL": "https://hs.example.com/"}))
	if err != nil {
		t.Fatal(err)
	}
	if s.HeadscaleURL != "https://hs.example.com" || s.LoginServer != s.HeadscaleURL || s.HeadscaleAPIKeyFile != "/headscale/api_key" || s.HeadscaleUser != "tailplane" {
		t.Fatalf("got %+v", s)
	}
	s, err = settings.FromEnv(env(map[string]string{"OPERATOR_NAMESPACE": "ts", "HEADSCALE_URL": "https://hs.example.com",
		"OPERATOR_LOGIN_SERVER": "https://hs.example.com/", "HEADSCALE_API_KEY_FILE": "/k", "HEADSCALE_USER": "ops"}))
	if err != nil || s.HeadscaleAPIKeyFile != "/k" || s.HeadscaleUser != "ops" {
		t.Fatalf("got %+v %v", s, err)
	}
	_, err = settings.FromEnv(env(map[string]string{"OPERATOR_NAMESPACE": "ts", "HEADSCALE_URL": "https://hs.example.com",
		"OPERATOR_LOGIN_SERVER": "https://controlplane.tailscale.com"}))
	if err == nil || !strings.Contains(err.Error(), "OPERATOR_LOGIN_SERVER (https://controlplane.tailscale.com) and HEADSCALE_URL (https://hs.example.com) differ") {
		t.Fatalf("error %v", err)
	}
}

// The proxies' ACME settings are independent: a private CA alone, or a
// plain-HTTP directory (a test ACME server) without one.
func TestProxyACMESettings(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want settings.ACME
		err  string
	}{
		{map[string]string{"PROXY_ACME_CA_FILE": "/etc/acme/ca.pem"}, settings.ACME{CAFile: "/etc/acme/ca.pem"}, ""},
		{map[string]string{"PROXY_ACME_DIRECTORY_URL": "http://pebble.acme:14000/dir"}, settings.ACME{DirectoryURL: "http://pebble.acme:14000/dir"}, ""},
		{map[string]string{"PROXY_ACME_DIRECTORY_URL": "ftp://pebble/dir"}, settings.ACME{}, `"ftp://pebble/dir" is not an http(s) URL`},
		{map[string]string{"PROXY_ACME_DIRECTORY_URL": "https:///dir"}, settings.ACME{}, `"https:///dir" is not an http(s) URL`},
	} {
		tc.env["OPERATOR_NAMESPACE"] = "ts"
		s, err := settings.FromEnv(env(tc.env))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v: error %v, want %q", tc.env, err, tc.err)
			}
			continue
		}
		if err != nil || s.ProxyACME != tc.want {
			t.Errorf("%v: %+v %v, want %+v", tc.env, s.ProxyACME, err, tc.want)
		}
	}
}
