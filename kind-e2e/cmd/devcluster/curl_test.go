package main

import (
	"context"
	"io"
	"net/url"
	"strings"
	"testing"
)

func TestCurlRequest(t *testing.T) {
	o, err := parseCurl([]string{"-H", "X-Canary: 1", "-H", "Host: other.example", "-d", "a=1", "-i", "--no-follow", "https://web.devcluster.ts.net/p?q=1"})
	if err != nil {
		t.Fatal(err)
	}
	if !o.include || !o.noFollow || o.verbose {
		t.Fatalf("flags %+v", o)
	}
	req, err := o.request(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(req.Body)
	if req.Method != "POST" || string(body) != "a=1" || req.Header.Get("X-Canary") != "1" || req.Host != "other.example" ||
		req.URL.String() != "https://web.devcluster.ts.net/p?q=1" {
		t.Fatalf("request %s %s host %q headers %v body %q", req.Method, req.URL, req.Host, req.Header, body)
	}
	o, _ = parseCurl([]string{"-X", "DELETE", "http://a.b/"})
	if req, _ := o.request(context.Background()); req.Method != "DELETE" || req.Body != nil {
		t.Fatalf("-X DELETE: %s", req.Method)
	}
	for _, bad := range [][]string{{"-H", "nocolon", "http://a.b/"}, {"ftp://a.b/"}, {"http://a.b/", "http://c.d/"}, {}} {
		if _, err := parseCurl(bad); err == nil || !strings.Contains(err.Error(), "curl") {
			t.Errorf("%q accepted: %v", bad, err)
		}
	}
}

// --tailnet 2 joins the second tailnet of --tailnets 2 with its OAuth
// client (and its control URL, the first's unless tailnet.env says
// otherwise); a cluster of one tailnet says how to get one.
func TestCurlSecondTailnet(t *testing.T) {
	o, err := parseCurl([]string{"--tailnet", "2", "http://a.b/"})
	if err != nil || o.tailnet != 2 {
		t.Fatalf("--tailnet 2: %+v %v", o, err)
	}
	if _, err := parseCurl([]string{"--tailnet", "3", "http://a.b/"}); err == nil {
		t.Fatal("--tailnet 3 accepted")
	}
	env := map[string]string{"TS_CONTROL_URL": "http://127.0.0.1:1", "TS_API_URL": "http://127.0.0.1:1", "TS_API_CLIENT_ID": "one", "TS_CA_FILE": "/ca.pem"}
	if _, err := secondTailnet(env); err == nil || !strings.Contains(err.Error(), "--tailnets 2") {
		t.Fatalf("one tailnet: %v", err)
	}
	env["SECOND_TS_CONTROL_URL"], env["SECOND_TS_API_URL"], env["SECOND_TS_API_CLIENT_ID"] = "http://127.0.0.1:2", "http://127.0.0.1:2", "two"
	got, err := secondTailnet(env)
	if err != nil || got["TS_CONTROL_URL"] != "http://127.0.0.1:2" || got["TS_API_URL"] != "http://127.0.0.1:2" ||
		got["TS_API_CLIENT_ID"] != "two" || got["TS_CA_FILE"] != "/ca.pem" || env["TS_API_CLIENT_ID"] != "one" {
		t.Fatalf("second tailnet env %v, %v", got, err)
	}
}

// --tag gives curl's node tags (for a policy that filters untagged
// devices); a malformed tag is refused before anything is minted.
func TestCurlTags(t *testing.T) {
	o, err := parseCurl([]string{"--tag", "tag:ci", "--tag", "tag:k8s", "https://a.b/"})
	if err != nil || len(o.tags) != 2 || o.tags[0] != "tag:ci" || o.tags[1] != "tag:k8s" {
		t.Fatalf("--tag twice: %+v %v", o, err)
	}
	if _, err := parseCurl([]string{"--tag", "ci", "https://a.b/"}); err == nil || !strings.Contains(err.Error(), `--tag "ci"`) {
		t.Fatalf("--tag ci (no tag: prefix): %v, want it refused", err)
	}
	for raw, want := range map[string]uint16{"https://a.b/": 443, "http://a.b/": 80, "https://a.b:8443/": 8443} {
		u, _ := url.Parse(raw)
		if got := urlPort(u); got != want {
			t.Errorf("urlPort(%s) = %d, want %d", raw, got, want)
		}
	}
}
