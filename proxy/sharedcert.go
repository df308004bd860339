package proxy

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// sharedCert follows one kubernetes.io/tls Secret that holds a Tailscale
// Service's certificate (TLS mode shared): every replica serves from it,
// so a renewal written by the issuing replica is served by all of them
// without a restart.
type sharedCert struct {
	secret string
	cur    atomic.Pointer[loadedCert]
	// changed wakes the issuer when the Secret changed (buffered, 1), so
	// that a certificate removed or replaced by hand is dealt with at once.
	changed chan struct{}
	cancel  context.CancelFunc
	// issuer runs while this replica issues the certificate for domain.
	issuer       context.CancelFunc
	issuerDomain string
}

// loadedCert is the Secret's content as last seen.
type loadedCert struct {
	cert *tls.Certificate // nil when err is set
	err  error
}

// usableFor says whether the loaded certificate can serve domain now.
func (l *loadedCert) usableFor(domain string, now time.Time) error {
	if l == nil {
		return errors.New("not read yet")
	}
	if l.err != nil {
		return l.err
	}
	leaf := l.cert.Leaf
	if err := leaf.VerifyHostname(domain); err != nil {
		return fmt.Errorf("holds a certificate for %v, not %s", leaf.DNSNames, domain)
	}
	if now.After(leaf.NotAfter) {
		return fmt.Errorf("holds a certificate for %s that expired at %s", domain, leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	return nil
}

func parseTLSSecret(sec *corev1.Secret) *loadedCert {
	crt, key := sec.Data[corev1.TLSCertKey], sec.Data[corev1.TLSPrivateKeyKey]
	if len(crt) == 0 || len(key) == 0 {
		return &loadedCert{err: errors.New("holds no certificate yet")}
	}
	cert, err := tls.X509KeyPair(crt, key)
	if err != nil {
		return &loadedCert{err: fmt.Errorf("holds no usable key pair: %w", err)}
	}
	return &loadedCert{cert: &cert}
}

// sharedCertFor returns the follower of a certificate Secret, starting it
// on first use. Only the Run goroutine calls it.
func (e *Engine) sharedCertFor(secret string) (*sharedCert, error) {
	if c, ok := e.sharedCerts[secret]; ok {
		return c, nil
	}
	if e.opts.Kube == nil {
		return nil, fmt.Errorf("tls mode %q needs the Kubernetes API, and this proxy runs without it", "shared")
	}
	ctx, cancel := context.WithCancel(e.hard)
	c := &sharedCert{secret: secret, cancel: cancel, changed: make(chan struct{}, 1)}
	factory := informers.NewSharedInformerFactoryWithOptions(e.opts.Kube, 0,
		informers.WithNamespace(e.opts.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", secret).String()
		}))
	inf := factory.Core().V1().Secrets().Informer()
	set := func(obj any) {
		if sec, ok := obj.(*corev1.Secret); ok {
			l := parseTLSSecret(sec)
			c.cur.Store(l)
			if l.cert != nil && l.cert.Leaf != nil && len(l.cert.Leaf.DNSNames) > 0 {
				e.metrics.CertificateObtained(l.cert.Leaf.DNSNames[0], l.cert.Leaf)
			}
			select {
			case c.changed <- struct{}{}:
			default:
			}
			e.wakeGroup()
		}
	}
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    set,
		UpdateFunc: func(_, obj any) { set(obj) },
		DeleteFunc: func(any) {
			// The certificate already loaded keeps serving; a missing
			// Secret is what the operator must fix.
			e.log.Warn("certificate Secret deleted; keeping the loaded certificate", "secret", e.opts.Namespace+"/"+secret)
		},
	})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("watch certificate Secret %s/%s: %w", e.opts.Namespace, secret, err)
	}
	factory.Start(ctx.Done())
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		defer factory.Shutdown()
		// Say "not found" rather than "not read yet" once the informer
		// listed no such Secret (the registration's HasSynced waits for
		// the handler too, so an existing Secret was set by then).
		if cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) &&
			c.cur.CompareAndSwap(nil, &loadedCert{err: errors.New("not found (the operator creates it)")}) {
			e.wakeGroup()
		}
		<-ctx.Done()
	}()
	e.sharedCerts[secret] = c
	return c, nil
}

// stop ends the Secret's follower and its issuer.
func (c *sharedCert) stop() {
	if c.issuer != nil {
		c.issuer()
	}
	c.cancel()
}

// getCertificate serves the Secret's current certificate.
func (c *sharedCert) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	l := c.cur.Load()
	if l == nil || l.cert == nil {
		return nil, fmt.Errorf("certificate Secret %s has no certificate yet", c.secret)
	}
	return l.cert, nil
}

// Renewal timing of the issuing replica: a certificate is renewed once
// less than a third of its lifetime is left (Let's Encrypt's advice, and
// what tailscaled does for its own), checked at least every recheck.
const (
	issueRecheck    = time.Hour
	issueMinBackoff = 5 * time.Second
	issueMaxBackoff = 5 * time.Minute
)

// errNotGranted is the wait for control to list the service's name among
// the node's certificate domains: a local check, so it is retried at the
// shortest interval rather than backing off like a failed issuance.
var errNotGranted = errors.New("control does not list the name among this node's certificate domains yet (is the Tailscale Service approved for this host?)")

// needsIssue says whether the Secret's certificate must be (re)issued for
// domain, and otherwise when to look again.
func needsIssue(l *loadedCert, domain string, now time.Time) (bool, time.Duration) {
	if l.usableFor(domain, now) != nil {
		return true, 0
	}
	leaf := l.cert.Leaf
	renewAt := leaf.NotAfter.Add(-leaf.NotAfter.Sub(leaf.NotBefore) / 3)
	if !now.Before(renewAt) {
		return true, 0
	}
	return false, min(renewAt.Sub(now), issueRecheck)
}

// startIssuer makes this replica the one that issues domain's certificate
// into the Secret and renews it. An issuer that finds a usable certificate
// in the Secret (written before a restart, or by a previous issuer) does
// not issue again until renewal is due: one issuance per name.
func (e *Engine) startIssuer(c *sharedCert, domain string) {
	if c.issuer != nil && c.issuerDomain == domain {
		return
	}
	if c.issuer != nil {
		c.issuer()
	}
	ctx, cancel := context.WithCancel(e.hard)
	c.issuer, c.issuerDomain = cancel, domain
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		backoff := issueMinBackoff
		for {
			wait := backoff
			now := time.Now()
			// The informer delivers the Secret shortly after start;
			// issuing before it did could spend an issuance for nothing.
			if l := c.cur.Load(); l != nil {
				if issue, next := needsIssue(l, domain, now); !issue {
					wait, backoff = next, issueMinBackoff
				} else if err := e.issueInto(ctx, c.secret, domain); errors.Is(err, errNotGranted) {
					e.log.Debug("waiting for control to grant the certificate name", "domain", domain)
				} else if err != nil {
					if ctx.Err() != nil {
						return
					}
					e.metrics.CertificateFailed(domain)
					e.log.Warn("cannot issue the Tailscale Service certificate; retrying", "domain", domain, "secret", c.secret, "in", backoff, "err", err)
					backoff = min(2*backoff, issueMaxBackoff)
				} else {
					e.log.Info("Tailscale Service certificate issued into its Secret", "domain", domain, "secret", c.secret)
					wait, backoff = issueMinBackoff, issueMinBackoff
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-c.changed:
			case <-time.After(wait):
			}
		}
	}()
}

// issueInto obtains domain's certificate and writes it to the Secret.
func (e *Engine) issueInto(ctx context.Context, secret, domain string) error {
	ictx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	issue := e.opts.IssueCert
	if issue == nil {
		issue = e.tailnetCert
	}
	crt, key, err := issue(ictx, domain)
	if err != nil {
		return fmt.Errorf("obtain certificate for %s: %w", domain, err)
	}
	if _, err := tls.X509KeyPair(crt, key); err != nil {
		return fmt.Errorf("certificate obtained for %s is unusable: %w", domain, err)
	}
	patch, err := json.Marshal(map[string]any{"data": map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key}})
	if err != nil {
		return fmt.Errorf("encode certificate Secret patch: %w", err)
	}
	_, err = e.opts.Kube.CoreV1().Secrets(e.opts.Namespace).Patch(ictx, secret, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "tailplane-proxy"})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("certificate Secret %s/%s not found (the operator creates it)", e.opts.Namespace, secret)
	}
	if err != nil {
		return fmt.Errorf("write certificate Secret %s/%s: %w", e.opts.Namespace, secret, err)
	}
	return nil
}

// tailnetCert obtains domain's certificate through the node (ACME via the
// control server), which control allows once it lists domain among the
// node's certificate domains: for a Tailscale Service, after the node
// advertised it and control approved the node as its host.
func (e *Engine) tailnetCert(ctx context.Context, domain string) (certPEM, keyPEM []byte, err error) {
	if !slices.Contains(e.node.CertDomains(), domain) {
		return nil, nil, fmt.Errorf("%s: %w", domain, errNotGranted)
	}
	lc, err := e.node.LocalClient()
	if err != nil {
		return nil, nil, err
	}
	return lc.CertPair(ctx, domain)
}
