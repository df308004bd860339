package config

import (
	"strings"
	"testing"
)

const validL7 = `{
 "version": "v1alpha1", "hostname": "web", "role": "ingress-l7", "tags": ["tag:k8s"],
 "loginServer": "https://control.example.com",
 "l7": {
  "tls": {"mode": "secret", "secretName": "web-tls"}, "httpRedirect": true,
  "rules": [{"host": "*.example.com", "paths": [
    {"path": "/api", "pathType": "Prefix", "backend": {"service": "ns/api:80", "address": "10.0.0.1:80"}},
    {"path": "/", "pathType": "Exact", "backend": {"service": "ns/web:80", "address": "10.0.0.2:80"}}]}],
  "defaultBackend": {"service": "ns/web:80", "address": "10.0.0.2:80"}
 }
}`

func TestParseValid(t *testing.T) {
	c, err := Parse([]byte(validL7))
	if err != nil {
		t.Fatalf("valid config refused: %v", err)
	}
	if c.Role != RoleIngressL7 || c.L7.Rules[0].Paths[0].Backend.Address != "10.0.0.1:80" || !c.L7.HTTPRedirect {
		t.Fatalf("decoded wrongly: %+v", c)
	}
	l4 := `{"version":"v1alpha1","hostname":"db","role":"ingress-l4","l4":{"ports":[
	  {"port":5432,"target":"10.0.0.3:5432"},{"protocol":"UDP","port":53,"target":"10.0.0.4:53"},{"protocol":"TCP","port":53,"target":"10.0.0.4:53"}]}}`
	if _, err := Parse([]byte(l4)); err != nil {
		t.Fatalf("valid l4 refused: %v", err)
	}
	eg := `{"version":"v1alpha1","hostname":"eg","role":"egress","egress":{"targets":[
	  {"fqdn":"db.tail.ts.net.","ports":[{"port":5432}]},{"ip":"100.64.0.9","ports":[{"port":80,"targetPort":8080}]}]}}`
	if _, err := Parse([]byte(eg)); err != nil {
		t.Fatalf("valid egress refused: %v", err)
	}
}

func TestParseRejects(t *testing.T) {
	cases := []struct {
		name, doc, want string
	}{
		{"unknown version", `{"version":"v9","hostname":"a","role":"egress"}`, `version: unknown config version "v9"`},
		{"not json", `{`, "not valid JSON"},
		{"unknown field", `{"version":"v1alpha1","hostname":"a","role":"egress","bogus":1}`, `unknown field "bogus"`},
		{"bad hostname", `{"version":"v1alpha1","hostname":"Bad_Name","role":"egress","egress":{"targets":[{"ip":"100.64.0.1","ports":[{"port":1}]}]}}`, "hostname: \"Bad_Name\" is not a DNS label"},
		{"bad tag", `{"version":"v1alpha1","hostname":"a","tags":["k8s"],"role":"egress","egress":{"targets":[{"ip":"100.64.0.1","ports":[{"port":1}]}]}}`, "tags[0]: \"k8s\" is not a tag"},
		{"bad cidr", `{"version":"v1alpha1","hostname":"a","allowedSourceRanges":["10.0.0.0/33"],"role":"egress","egress":{"targets":[{"ip":"100.64.0.1","ports":[{"port":1}]}]}}`, `allowedSourceRanges[0]: bad CIDR "10.0.0.0/33"`},
		{"bad listen port", `{"version":"v1alpha1","hostname":"a","listenPort":70000,"role":"egress","egress":{"targets":[{"ip":"100.64.0.1","ports":[{"port":1}]}]}}`, `listenPort: 70000 is not a UDP port`},
		{"bad static endpoint", `{"version":"v1alpha1","hostname":"a","staticEndpoints":["192.0.2.1"],"role":"egress","egress":{"targets":[{"ip":"100.64.0.1","ports":[{"port":1}]}]}}`, `staticEndpoints[0]: "192.0.2.1" is not an ip:port address`},
		{"unknown role", `{"version":"v1alpha1","hostname":"a","role":"router"}`, `role: unknown role "router"`},
		{"missing section", `{"version":"v1alpha1","hostname":"a","role":"ingress-l4"}`, `l4: is required for role "ingress-l4"`},
		{"extra section", `{"version":"v1alpha1","hostname":"a","role":"ingress-l4","l4":{"ports":[{"port":1,"target":"10.0.0.1:1"}]},"egress":{"targets":[]}}`, `egress: must be empty for role "ingress-l4"`},
		{"bad port", `{"version":"v1alpha1","hostname":"a","role":"ingress-l4","l4":{"ports":[{"port":70000,"target":"10.0.0.1:1"}]}}`, "l4.ports[0].port: bad port 70000"},
		{"duplicate port", `{"version":"v1alpha1","hostname":"a","role":"ingress-l4","l4":{"ports":[{"port":80,"target":"10.0.0.1:1"},{"protocol":"TCP","port":80,"target":"10.0.0.1:2"}]}}`, "l4.ports[1].port: duplicate port TCP/80 (also l4.ports[0])"},
		{"bad target", `{"version":"v1alpha1","hostname":"a","role":"ingress-l4","l4":{"ports":[{"port":80,"target":"db_1:80"}]}}`, `l4.ports[0].target: "db_1:80": host "db_1" is neither an IP address nor a DNS name`},
		{"bad protocol", `{"version":"v1alpha1","hostname":"a","role":"ingress-l4","l4":{"ports":[{"protocol":"SCTP","port":80,"target":"10.0.0.1:1"}]}}`, `l4.ports[0].protocol: unknown protocol "SCTP"`},
		{"bad path type", `{"version":"v1alpha1","hostname":"a","role":"ingress-l7","l7":{"rules":[{"paths":[{"path":"/","pathType":"Regex","backend":{"service":"s","address":"10.0.0.1:80"}}]}]}}`, `l7.rules[0].paths[0].pathType: unknown path type "Regex"`},
		{"relative path", `{"version":"v1alpha1","hostname":"a","role":"ingress-l7","l7":{"rules":[{"paths":[{"path":"api","backend":{"service":"s","address":"10.0.0.1:80"}}]}]}}`, `l7.rules[0].paths[0].path: "api" must start with "/"`},
		{"bad wildcard", `{"version":"v1alpha1","hostname":"a","role":"ingress-l7","l7":{"rules":[{"host":"a.*.com","paths":[{"path":"/","backend":{"service":"s","address":"10.0.0.1:80"}}]}]}}`, `l7.rules[0].host: "a.*.com" is not a host name`},
		{"duplicate path", `{"version":"v1alpha1","hostname":"a","role":"ingress-l7","l7":{"rules":[{"paths":[{"path":"/a","backend":{"service":"s","address":"10.0.0.1:80"}},{"path":"/a","pathType":"ImplementationSpecific","backend":{"service":"s","address":"10.0.0.1:80"}}]}]}}`, "l7.rules[0].paths[1]: duplicates l7.rules[0].paths[0]"},
		{"no routes", `{"version":"v1alpha1","hostname":"a","role":"ingress-l7","l7":{}}`, "l7: needs at least one rule or a defaultBackend"},
		{"secret without name", `{"version":"v1alpha1","hostname":"a","role":"ingress-l7","l7":{"tls":{"mode":"secret"},"defaultBackend":{"service":"s","address":"10.0.0.1:80"}}}`, `l7.tls.secretName: is required for mode "secret"`},
		{"unknown tls mode", `{"version":"v1alpha1","hostname":"a","role":"ingress-l7","l7":{"tls":{"mode":"acme"},"defaultBackend":{"service":"s","address":"10.0.0.1:80"}}}`, `l7.tls.mode: unknown TLS mode "acme"`},
		{"redirect and plain", `{"version":"v1alpha1","hostname":"a","role":"ingress-l7","l7":{"httpRedirect":true,"plainHTTP":true,"defaultBackend":{"service":"s","address":"10.0.0.1:80"}}}`, "l7: httpRedirect and plainHTTP both claim port 80"},
		{"egress both", `{"version":"v1alpha1","hostname":"a","role":"egress","egress":{"targets":[{"ip":"100.64.0.1","fqdn":"a.b","ports":[{"port":1}]}]}}`, "egress.targets[0]: set exactly one of fqdn and ip"},
		{"egress bad ip", `{"version":"v1alpha1","hostname":"a","role":"egress","egress":{"targets":[{"ip":"100.64.0","ports":[{"port":1}]}]}}`, `egress.targets[0].ip: "100.64.0" is not an IP address`},
		{"egress shared port", `{"version":"v1alpha1","hostname":"a","role":"egress","egress":{"targets":[{"ip":"100.64.0.1","ports":[{"port":1}]},{"ip":"100.64.0.2","ports":[{"port":1}]}]}}`, "egress.targets[1].ports: duplicate listen port TCP/1 (also egress.targets[0])"},
		{"bad login server", `{"version":"v1alpha1","hostname":"a","loginServer":"ftp://x","role":"egress","egress":{"targets":[{"ip":"100.64.0.1","ports":[{"port":1}]}]}}`, `loginServer: "ftp://x" is not an http(s) URL`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc))
			if err == nil {
				t.Fatalf("accepted; want error containing %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	c := &Config{Version: Version, Hostname: "-", Role: RoleIngressL4, L4: &L4{Ports: []PortMap{{Port: 0, Target: "x"}}}}
	err := c.Validate()
	for _, want := range []string{"hostname:", "l4.ports[0].port: bad port 0", "l4.ports[0].target:"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
}

func TestGroupSectionIsValidated(t *testing.T) {
	good := `{"version":"v1alpha1","hostname":"pg-0","role":"ingress-group","group":{"services":[
		{"name":"svc:web","l7":{"tls":{"mode":"shared","secretName":"web.tail.ts.net","issue":true},
			"defaultBackend":{"service":"default/web:80","address":"10.0.0.1:80"}}},
		{"name":"svc:db","l4":{"ports":[{"port":5432,"target":"10.0.0.2:5432"}]}}]}}`
	if _, err := Parse([]byte(good)); err != nil {
		t.Fatalf("valid group config refused: %v", err)
	}
	bad := `{"version":"v1alpha1","hostname":"pg-0","role":"ingress-group","group":{"services":[
		{"name":"web","l7":{"tls":{"mode":"tailscale-cert"},"funnel":true,
			"defaultBackend":{"service":"default/web:80","address":"10.0.0.1:80"}}},
		{"name":"svc:db"},
		{"name":"svc:db","l4":{"ports":[]}}]}}`
	_, err := Parse([]byte(bad))
	if err == nil {
		t.Fatal("bad group config accepted")
	}
	for _, want := range []string{
		`group.services[0].name: "web" is not a Tailscale Service name`,
		`group.services[0].l7.tls.mode: must be "shared"`,
		`group.services[0].l7.funnel: Funnel is not offered`,
		`group.services[1]: exactly one of l7, l4 or gateway is required`,
		`group.services[2].name: "svc:db" is also group.services[1]`,
		`group.services[2].l4.ports: at least one port is required`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if _, err := Parse([]byte(`{"version":"v1alpha1","hostname":"pg-0","role":"ingress-group"}`)); err == nil || !strings.Contains(err.Error(), "group: is required") {
		t.Errorf("missing group section: %v", err)
	}
}

// TLS mode none serves port 80 only: it needs plainHTTP and cannot go with
// Funnel, which serves HTTPS.
func TestTLSModeNone(t *testing.T) {
	b := Backend{Service: "default/web:80", Address: "127.0.0.1:80"}
	c := &Config{Version: Version, Hostname: "web", Role: RoleIngressL7, L7: &L7{TLS: TLS{Mode: TLSNone}, PlainHTTP: true, DefaultBackend: &b}}
	if err := c.Validate(); err != nil {
		t.Fatalf("plain HTTP without TLS refused: %v", err)
	}
	c.L7.PlainHTTP, c.L7.Funnel = false, true
	err := c.Validate()
	for _, want := range []string{`l7.tls.mode: "none" serves nothing without plainHTTP`, "l7.funnel: Funnel serves HTTPS"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
}
