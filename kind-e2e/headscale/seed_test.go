//go:build headscale

package headscale

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// node is what the headscale CLI lists of a node (nodes list -o json).
type node struct {
	GivenName   string   `json:"given_name"`
	ForcedTags  []string `json:"forced_tags"`
	IPAddresses []string `json:"ip_addresses"`
}

// listNodes lists Headscale's nodes with the headscale CLI.
func listNodes(ctx context.Context) ([]node, error) {
	out, err := headscaleCLI(ctx, "nodes", "list", "-o", "json")
	if err != nil {
		return nil, err
	}
	var nodes []node
	if err := json.Unmarshal([]byte(out), &nodes); err != nil {
		return nil, fmt.Errorf("%w: %s", err, out)
	}
	return nodes, nil
}

func nodeNames(ctx SpecContext) ([]string, error) {
	nodes, err := listNodes(ctx)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, n := range nodes {
		if slices.Contains(n.ForcedTags, "tag:k8s") {
			names = append(names, n.GivenName)
		}
	}
	return names, nil
}

// ownCertificate writes a CA (caFile) and a kubernetes.io/tls Secret
// manifest with a certificate for host signed by it.
func ownCertificate(dir, host, secret string) (caFile, manifest string) {
	GinkgoHelper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	Expect(err).NotTo(HaveOccurred())
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "e2e user CA"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour)}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	Expect(err).NotTo(HaveOccurred())
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	Expect(err).NotTo(HaveOccurred())
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: host}, DNSNames: []string{host},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	Expect(err).NotTo(HaveOccurred())
	keyDER, err := x509.MarshalECPrivateKey(key)
	Expect(err).NotTo(HaveOccurred())
	caFile = filepath.Join(dir, "user-ca.pem")
	Expect(os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644)).To(Succeed())
	b64 := func(typ string, der []byte) string {
		return base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}))
	}
	manifest = filepath.Join(dir, "own-cert.yaml")
	Expect(os.WriteFile(manifest, fmt.Appendf(nil, "apiVersion: v1\nkind: Secret\nmetadata: {name: %s}\ntype: kubernetes.io/tls\ndata:\n  tls.crt: %s\n  tls.key: %s\n",
		secret, b64("CERTIFICATE", der), b64("EC PRIVATE KEY", keyDER)), 0o644)).To(Succeed())
	return caFile, manifest
}

// ingressManifest is an Ingress serving my-app with the certificate of
// Secret secret (tls[0].secretName), the way it must on Headscale.
func ingressManifest(dir, secret string) string {
	GinkgoHelper()
	path := filepath.Join(dir, "ingress.yaml")
	Expect(os.WriteFile(path, fmt.Appendf(nil, `apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: my-site}
spec:
  ingressClassName: tailscale
  defaultBackend:
    service: {name: my-app, port: {number: 80}}
  tls:
    - hosts: [my-site]
      secretName: %s
`, secret), 0o644)).To(Succeed())
	return path
}

var _ = Describe("Tailplane on Headscale", Ordered, func() {
	var caFile, domain string

	BeforeAll(func() {
		domain = tailnetEnv()["TS_MAGICDNS_DOMAIN"]
		var certManifest string
		caFile, certManifest = ownCertificate(suite.dir, "my-site."+domain, "my-site-tls")
		out, err := devcluster("kubectl", "apply", "-f", "kind-e2e/operator/testdata/echo.yaml",
			"-f", "examples/seed/01-service-expose.yaml", "-f", certManifest, "-f", ingressManifest(suite.dir, "my-site-tls"))
		Expect(err).NotTo(HaveOccurred(), out)
	})

	It("puts the seed's exposed Service on the tailnet, as a tagged Headscale node", func(ctx SpecContext) {
		Eventually(func() (string, error) {
			return devcluster("curl", fmt.Sprintf("http://default-postgres.%s:5432/", domain))
		}).WithTimeout(3 * time.Minute).WithPolling(2 * time.Second).Should(ContainSubstring(`"pod":"postgres-`))
		Eventually(nodeNames).WithContext(ctx).WithTimeout(time.Minute).Should(ContainElement("default-postgres"))
	}, SpecTimeout(5*time.Minute))

	It("serves the Ingress over HTTPS with the user's certificate", func(ctx SpecContext) {
		Eventually(func() (string, error) {
			return devcluster("curl", "--cacert", caFile, fmt.Sprintf("https://my-site.%s/", domain))
		}).WithTimeout(3 * time.Minute).WithPolling(2 * time.Second).Should(ContainSubstring(`"pod":"my-app-`))
		Eventually(nodeNames).WithContext(ctx).WithTimeout(time.Minute).Should(ContainElement("my-site"))
	}, SpecTimeout(5*time.Minute))

	It("deletes their nodes from Headscale when they are deleted", func(ctx SpecContext) {
		out, err := devcluster("kubectl", "delete", "-f", "examples/seed/01-service-expose.yaml", "-f", ingressManifest(suite.dir, "my-site-tls"))
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(nodeNames).WithContext(ctx).WithTimeout(2*time.Minute).WithPolling(2*time.Second).Should(
			Not(ContainElement("default-postgres")), "the Service's node")
		Eventually(nodeNames).WithContext(ctx).WithTimeout(2*time.Minute).WithPolling(2*time.Second).Should(
			Not(ContainElement("my-site")), "the Ingress's node")
	}, SpecTimeout(5*time.Minute))
})
