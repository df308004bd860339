package proxy

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"tailscale.com/tsnet"

	"github.com/tailplane/tailplane/internal/kubestate"
	"github.com/tailplane/tailplane/internal/proxystate"
	"github.com/tailplane/tailplane/internal/tailnettest"
	"github.com/tailplane/tailplane/internal/testpoll"
	"github.com/tailplane/tailplane/proxy/config"
	"github.com/tailplane/tailplane/proxy/l7"
)

// An HTTPS-only Tailscale Service on two replicas shares one certificate
// through its Secret: the non-issuing replica does not advertise the
// service while the Secret is empty and says why in the state Secret; the
// issuing replica advertises at once (control grants the certificate name
// only to a host), issues once and writes the Secret; the other replica
// then advertises and serves HTTPS on the service addresses from the
// Secret, with the caller's identity, and serves renewed certificates
// without a restart; the issuer renews a certificate that nears its expiry.
//
// testcontrol issues no certificates, so the issuing replica's certificate
// source (Options.IssueCert, by default the node's ACME client) is a test
// CA here; the Secret handling around it is the product's.
func TestGroupSharedCertificate(t *testing.T) {
	ns := env.Namespace(t)
	cs := env.Clientset(t)
	ctx := context.Background()
	tn := tailnettest.New(t)
	domain := tailnettest.FQDN("web")
	emptyTLSSecret(t, cs, ns, "web-tls")
	backend := echoBackend(t, "web")
	b := backendOf("web", backend)
	groupCfg := func(hostname string, issue bool) *config.Config {
		cfg := newConfig(tn, hostname, config.RoleIngressGroup)
		cfg.Group = &config.Group{Services: []config.Service{{Name: "svc:web", L7: &config.L7{
			TLS: config.TLS{Mode: config.TLSShared, SecretName: "web-tls", Issue: issue}, DefaultBackend: &b}}}}
		return cfg
	}

	// The replica that does not issue, with its state in a Secret.
	state, err := kubestate.New(ctx, cs, ns, "pg-1")
	if err != nil {
		t.Fatal(err)
	}
	r1 := start(t, tn, groupCfg("pg-1", false), Options{State: state, Status: state, Kube: cs, Namespace: ns})
	report := func() (map[string]proxystate.ServiceReport, error) { return serviceReport(ctx, cs, ns, "pg-1") }
	testpoll.Until(t, 20*time.Second, "pg-1 reports svc:web waiting for its certificate", func() error {
		rep, err := report()
		if err != nil {
			return err
		}
		if got := rep["svc:web"]; got.Advertised || !strings.Contains(got.Error, "waiting for the certificate: Secret "+ns+"/web-tls holds no certificate yet") {
			return fmt.Errorf("report %+v", rep)
		}
		return nil
	})
	if got := advertisedServices(t, r1.engine.Node()); len(got) != 0 {
		t.Fatalf("pg-1 advertises %v without a certificate", got)
	}

	// The issuing replica; control has not granted the name at first.
	ca := newTestCA(t)
	var granted atomic.Bool
	var issued atomic.Int32
	issuer := startEngine(t, tn, groupCfg("pg-0", true), Options{Kube: cs, Namespace: ns,
		IssueCert: func(_ context.Context, d string) ([]byte, []byte, error) {
			if d != domain {
				return nil, nil, fmt.Errorf("asked for %q, want %q", d, domain)
			}
			if !granted.Load() {
				return nil, nil, errors.New("control has not granted the name yet")
			}
			issued.Add(1)
			crt, key, _, err := ca.issue(d, 90*24*time.Hour)
			return crt, key, err
		}})
	testpoll.UntilTrue(t, 60*time.Second, "pg-0 ready", issuer.engine.Ready)
	waitServices(t, issuer.engine.Node(), "svc:web")
	if got := advertisedServices(t, r1.engine.Node()); len(got) != 0 {
		t.Fatalf("pg-1 advertises %v before the certificate exists", got)
	}
	granted.Store(true)
	testpoll.Until(t, 30*time.Second, "the issuer writes the certificate into web-tls", func() error {
		sec, err := cs.CoreV1().Secrets(ns).Get(ctx, "web-tls", metav1.GetOptions{})
		if err != nil {
			return err
		}
		return parseTLSSecret(sec).usableFor(domain, time.Now())
	})
	waitServices(t, r1.engine.Node(), "svc:web")
	testpoll.Until(t, 10*time.Second, "pg-1 reports svc:web advertised", func() error {
		rep, err := report()
		if err != nil {
			return err
		}
		if rep["svc:web"] != (proxystate.ServiceReport{Advertised: true}) {
			return fmt.Errorf("report %+v", rep)
		}
		return nil
	})

	// Control sends the service's clients to pg-1.
	addrs := vipAddrs(7)
	hostServices(t, tn, r1.engine.Node(), map[string][]netip.Addr{"svc:web": addrs})
	for _, a := range addrs {
		c := vipHTTPS(r1.client, netip.AddrPortFrom(a, 443), ca.roots)
		testpoll.Until(t, 20*time.Second, "HTTPS to svc:web on "+a.String(), func() error {
			resp, body, err := get(c, "https://"+domain+"/hello", nil)
			if err != nil {
				return err
			}
			if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Backend") != "web" {
				return fmt.Errorf("status %d, body %q", resp.StatusCode, body)
			}
			// The connection reached the proxy with the caller's own
			// tailnet address: no loopback hop in between.
			var e echoed
			if err := json.Unmarshal(body, &e); err != nil {
				return err
			}
			if e.Header.Get(l7.HeaderUserLogin) == "" {
				return fmt.Errorf("no %s header: the caller was not identified (headers %v)", l7.HeaderUserLogin, e.Header)
			}
			return nil
		})
	}

	// A renewal written to the Secret is served without a restart.
	crt, key, serial, err := ca.issue(domain, 90*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	putTLS(t, cs, ns, "web-tls", crt, key)
	testpoll.Until(t, 10*time.Second, "pg-1 serves the renewed certificate", servesSerial(r1.client, netip.AddrPortFrom(addrs[0], 443), domain, ca, serial))
	// One issuance for the name, however many replicas serve it.
	if n := issued.Load(); n != 1 {
		t.Errorf("the certificate was issued %d times, want 1", n)
	}

	// A certificate with less than a third of its lifetime left is
	// renewed by the issuer, and the renewal served by pg-1.
	crt, key, old, err := ca.issue(domain, 80*time.Minute) // 20 of 80 minutes left
	if err != nil {
		t.Fatal(err)
	}
	putTLS(t, cs, ns, "web-tls", crt, key)
	var renewed int64
	testpoll.Until(t, 20*time.Second, "the issuer renews the certificate", func() error {
		sec, err := cs.CoreV1().Secrets(ns).Get(ctx, "web-tls", metav1.GetOptions{})
		if err != nil {
			return err
		}
		l := parseTLSSecret(sec)
		if l.err != nil {
			return l.err
		}
		if renewed = l.cert.Leaf.SerialNumber.Int64(); renewed == old {
			return fmt.Errorf("still serial %d", old)
		}
		return nil
	})
	if n := issued.Load(); n != 2 {
		t.Errorf("issued %d times after the renewal, want 2", n)
	}
	testpoll.Until(t, 10*time.Second, "pg-1 serves the issuer's renewal", servesSerial(r1.client, netip.AddrPortFrom(addrs[0], 443), domain, ca, renewed))
}

// putTLS writes a key pair into a kubernetes.io/tls Secret.
func putTLS(t *testing.T, cs kubernetes.Interface, ns, name string, crt, key []byte) {
	t.Helper()
	ctx := context.Background()
	sec, err := cs.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sec.Data[corev1.TLSCertKey], sec.Data[corev1.TLSPrivateKeyKey] = crt, key
	if _, err := cs.CoreV1().Secrets(ns).Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// servesSerial checks that a TLS handshake with addr for domain presents
// the certificate with serial.
func servesSerial(client *tsnet.Server, addr netip.AddrPort, domain string, ca *testCA, serial int64) func() error {
	return func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn, err := dialOverTailnet(ctx, client, "tcp", addr)
		if err != nil {
			return err
		}
		tc := tls.Client(conn, &tls.Config{ServerName: domain, RootCAs: ca.roots})
		defer tc.Close()
		if err := tc.HandshakeContext(ctx); err != nil {
			return err
		}
		if got := tc.ConnectionState().PeerCertificates[0].SerialNumber.Int64(); got != serial {
			return fmt.Errorf("serves serial %d, want %d", got, serial)
		}
		return nil
	}
}

// emptyTLSSecret creates the certificate Secret of a Tailscale Service
// empty, as the operator does before the issuing replica fills it.
func emptyTLSSecret(t *testing.T, cs kubernetes.Interface, ns, name string) {
	t.Helper()
	_, err := cs.CoreV1().Secrets(ns).Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: nil, corev1.TLSPrivateKeyKey: nil}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}
