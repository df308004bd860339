package tsservice

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/internal/proxystate"
)

// LabelMemberKind marks a shared certificate Secret with its owner's kind
// (with the parent name and namespace labels), so that it is found again
// whatever the owner's hostname was.
const LabelMemberKind = "tailplane.dev/member-kind"

// secretTypeCerts is the secret-type label of shared certificate Secrets.
const secretTypeCerts = "certs"

// CertSelector selects Tailplane's shared certificate Secrets of Tailscale
// Services (EnsureCertSecret) in the operator namespace.
const CertSelector = LabelMemberKind + "," + proxystate.LabelSecretType + "=" + secretTypeCerts

// CertSecretName is the kubernetes.io/tls Secret, in the operator namespace,
// through which a group's replicas share the certificate of hostname's
// Tailscale Service.
func CertSecretName(hostname string) string { return "ts-svc-" + hostname + "-tls" }

func certLabels(o Owner) map[string]string {
	return map[string]string{proxystate.LabelManaged: "true", proxystate.LabelSecretType: secretTypeCerts,
		LabelMemberKind: strings.ToLower(o.Kind), proxystate.LabelParentNamespace: o.Namespace,
		proxystate.LabelParentName: proxyset.TruncateLabelValue(o.Name)}
}

// EnsureCertSecret creates o's kubernetes.io/tls Secret name in namespace,
// which the group's issuing replica fills; an existing one is left alone (it
// holds the certificate). A new one starts with the certificate of the same
// Tailscale Service that the official operator's group left
// (OfficialCertSelector), so that replicas taking over from the official
// ones serve TLS at once instead of after a new issuance.
func EnsureCertSecret(ctx context.Context, kube kubernetes.Interface, namespace, name string, o Owner) error {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: certLabels(o)},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: nil, corev1.TLSPrivateKeyKey: nil},
	}
	// Looked up first: creating an empty TLS Secret draws a warning from
	// the API server on every attempt, even when it exists.
	_, err := kube.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
	if err == nil {
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("read shared certificate Secret %s: %w", name, err)
	}
	if hostname, ok := strings.CutPrefix(strings.TrimSuffix(name, "-tls"), "ts-svc-"); ok {
		official, err := officialCert(ctx, kube, namespace, hostname)
		if err != nil {
			return err
		}
		if official != nil {
			s.Data = official
		}
	}
	_, err = kube.CoreV1().Secrets(namespace).Create(ctx, s, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create shared certificate Secret %s: %w", name, err)
	}
	return nil
}

// DeleteCertSecrets deletes o's shared certificates in namespace.
func DeleteCertSecrets(ctx context.Context, kube kubernetes.Interface, namespace string, o Owner) error {
	// Listed and deleted one by one: the operator may not deletecollection.
	secrets := kube.CoreV1().Secrets(namespace)
	list, err := secrets.List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(certLabels(o)).String()})
	if err != nil {
		return fmt.Errorf("list shared certificates of %s %s/%s: %w", o.Kind, o.Namespace, o.Name, err)
	}
	for _, s := range list.Items {
		if err := secrets.Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete shared certificate %s of %s %s/%s: %w", s.Name, o.Kind, o.Namespace, o.Name, err)
		}
	}
	return nil
}

// OfficialCertSelector selects what the official operator made for its
// groups' Tailscale Service certificates in the operator namespace: a
// kubernetes.io/tls Secret named after the service's DNS name, and a Role
// and RoleBinding of the same name (cmd/k8s-operator/ingress-for-pg.go);
// they carry the DNS name in tailscale.com/domain and the group in
// tailscale.com/proxy-group, and none of Tailplane's labels.
const OfficialCertSelector = "tailscale.com/managed=true,tailscale.com/domain,tailscale.com/proxy-group,!" + LabelMemberKind + ",!" + proxyset.LabelProxyRole

// officialCert returns the certificate and key of hostname's Tailscale
// Service that the official operator's group left, or nil.
func officialCert(ctx context.Context, kube kubernetes.Interface, namespace, hostname string) (map[string][]byte, error) {
	list, err := kube.CoreV1().Secrets(namespace).List(ctx, metav1.ListOptions{LabelSelector: OfficialCertSelector})
	if err != nil {
		return nil, fmt.Errorf("list the official operator's certificate Secrets: %w", err)
	}
	for _, s := range list.Items {
		if first, _, _ := strings.Cut(s.Name, "."); first == hostname && len(s.Data[corev1.TLSCertKey]) > 0 && len(s.Data[corev1.TLSPrivateKeyKey]) > 0 {
			return map[string][]byte{corev1.TLSCertKey: s.Data[corev1.TLSCertKey], corev1.TLSPrivateKeyKey: s.Data[corev1.TLSPrivateKeyKey]}, nil
		}
	}
	return nil, nil
}
