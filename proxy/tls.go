package proxy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tailplane/tailplane/proxy/config"
)

// certSource returns the serving certificate for a handshake.
type certSource func(*tls.ClientHelloInfo) (*tls.Certificate, error)

// loadCertSource resolves a TLS section into a certificate source, or a
// precise error (missing Secret, wrong type, unreadable files) about field,
// the section's path in the config ("l7.tls").
func (e *Engine) loadCertSource(ctx context.Context, field string, t config.TLS) (certSource, error) {
	switch t.EffectiveMode() {
	case config.TLSSecret:
		if e.opts.Kube == nil {
			return nil, fmt.Errorf("%s: mode %q needs the Kubernetes API, and this proxy runs without it", field, config.TLSSecret)
		}
		sec, err := e.opts.Kube.CoreV1().Secrets(e.opts.Namespace).Get(ctx, t.SecretName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("%s.secretName: TLS Secret %s/%s not found", field, e.opts.Namespace, t.SecretName)
		}
		if err != nil {
			return nil, fmt.Errorf("%s.secretName: read TLS Secret %s/%s: %w", field, e.opts.Namespace, t.SecretName, err)
		}
		if sec.Type != corev1.SecretTypeTLS {
			return nil, fmt.Errorf("%s.secretName: Secret %s/%s has type %q, want %q", field, e.opts.Namespace, t.SecretName, sec.Type, corev1.SecretTypeTLS)
		}
		cert, err := tls.X509KeyPair(sec.Data[corev1.TLSCertKey], sec.Data[corev1.TLSPrivateKeyKey])
		if err != nil {
			return nil, fmt.Errorf("%s.secretName: Secret %s/%s holds no usable key pair: %w", field, e.opts.Namespace, t.SecretName, err)
		}
		if cert.Leaf != nil && len(cert.Leaf.DNSNames) > 0 {
			e.metrics.CertificateObtained(cert.Leaf.DNSNames[0], cert.Leaf)
		}
		return func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return &cert, nil }, nil
	case config.TLSNone:
		return func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return nil, fmt.Errorf("%s: mode %q serves no HTTPS", field, config.TLSNone)
		}, nil
	case config.TLSFiles:
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("%s: load certFile/keyFile: %w", field, err)
		}
		return func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return &cert, nil }, nil
	default:
		lc, err := e.node.LocalClient()
		if err != nil {
			return nil, fmt.Errorf("%s: tailscale certificate: %w", field, err)
		}
		// Looked up on every handshake, the certificate would cost a
		// LocalAPI call and its parsing each time; see certCacheTTL.
		cc := newCertCache(lc.GetCertificate, certCacheTTL, time.Now)
		cc.observe = e.observeCert
		return onlyNames(e.node.CertDomains, cc.get), nil
	}
}

// observeCert records a node certificate lookup in the metrics: the
// expiry of what came back, or a failure (issuance or renewal).
func (e *Engine) observeCert(name string, cert *tls.Certificate, err error) {
	if err != nil {
		e.metrics.CertificateFailed(name)
		return
	}
	if cert != nil {
		leaf := cert.Leaf
		if leaf == nil && len(cert.Certificate) > 0 {
			leaf, _ = x509.ParseCertificate(cert.Certificate[0])
		}
		e.metrics.CertificateObtained(name, leaf)
	}
}

// tlsConfig serves whatever certificate source is current, with HTTP/2.
func (e *Engine) tlsConfig() *tls.Config {
	return &tls.Config{
		NextProtos: []string{"h2", "http/1.1"},
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(hi *tls.ClientHelloInfo) (*tls.Certificate, error) {
			src := e.certs.Load()
			if src == nil {
				return nil, fmt.Errorf("no certificate configured")
			}
			return (*src)(hi)
		},
	}
}

// refreshTLSSecret re-reads the current config's TLS Secret and serves its
// key pair from now on. A Secret that became unusable is logged and the
// certificate already loaded keeps serving.
func (e *Engine) refreshTLSSecret(ctx context.Context) {
	cur := e.current
	if cur == nil || cur.L7 == nil || cur.L7.TLS.EffectiveMode() != config.TLSSecret {
		return
	}
	src, err := e.loadCertSource(ctx, "l7.tls", cur.L7.TLS)
	if err != nil {
		e.log.Warn("cannot refresh the TLS certificate; keeping the loaded one", "err", err)
		return
	}
	e.certs.Store(&src)
}
