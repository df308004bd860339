package main

import (
	"context"
	"io"
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
