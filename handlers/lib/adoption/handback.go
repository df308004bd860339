package adoption

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"maps"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/internal/proxystate"
)

// Hand-back is adoption in reverse (docs/migration.md, "Going back"): each
// Tailplane proxy's device state is left in the layout the official
// operator (v1.102.5, cmd/k8s-operator) looks for when it provisions a
// parent, so that its proxy starts as the same device and no auth key is
// minted:
//   - a single proxy (Service, Ingress, Connector): it finds the headless
//     Service by the parent labels, and the replica Secrets by the names
//     "<headless Service>-<ordinal>"; a Secret with a device_id is used
//     as it is. Tailplane's state Secrets are already named
//     "<base>-<ordinal>", so the headless Service is named <base>.
//   - a ProxyGroup: state Secrets "<group>-<ordinal>" and config Secrets
//     "<group>-<ordinal>-config" (an existing config Secret without an
//     auth key keeps it from minting one), owned by the ProxyGroup.

// The official parent types a hand-back knows the layout of.
const (
	typeService    = proxyset.ParentService
	typeIngress    = proxyset.ParentIngress
	typeConnector  = "connector"
	typeProxyGroup = "proxygroup"
)

// HandBackProxy is a Tailplane proxy to hand back, as its state Secrets
// say.
type HandBackProxy struct {
	// Type, Namespace and Name are the parent labels of its state Secrets
	// (proxystate.LabelParent*).
	Type, Namespace, Name string
	// Base is the proxy's base name: its StatefulSet, and its state
	// Secrets' names without "-<ordinal>".
	Base string
	// States are its replicas' state Secrets.
	States []corev1.Secret
	// Owner, for a ProxyGroup, is the group: the official operator's
	// group Secrets are owned by it (garbage collected with it).
	Owner *metav1.OwnerReference
}

// HandBackPlan is what a hand-back writes for one proxy.
type HandBackPlan struct {
	// Headless is a single proxy's headless Service; nil for a group.
	Headless *corev1.Service
	// Replicas, by ordinal.
	Replicas []HandBackReplica
}

// HandBackReplica is one replica's official Secrets.
type HandBackReplica struct {
	// From is Tailplane's state Secret it is made from.
	From string
	// State is the official state Secret (for a single proxy, of the same
	// name as From: it replaces its labels and data).
	State *corev1.Secret
	// Config is a group replica's official config Secret, empty; nil for a
	// single proxy (whose config lives in its state Secret).
	Config *corev1.Secret
}

// PlanHandBack returns what to write so that the official operator takes
// p's devices over, or an error saying why it cannot: a kind the official
// operator has no proxy of. (A parent name too long for a label is found
// by the caller: no parent has the truncated name.)
func PlanHandBack(p HandBackProxy, namespace string) (HandBackPlan, error) {
	var plan HandBackPlan
	switch p.Type {
	case typeService, typeIngress, typeConnector:
		l := officialChildLabels(p)
		plan.Headless = &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: p.Base, Namespace: namespace, Labels: l},
			Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone,
				IPFamilyPolicy: ptr(corev1.IPFamilyPolicyPreferDualStack)},
		}
		for _, s := range p.States {
			plan.Replicas = append(plan.Replicas, HandBackReplica{From: s.Name, State: &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: namespace, Labels: maps.Clone(l)},
				Type:       corev1.SecretTypeOpaque,
				Data:       Carried(s.Data),
			}})
		}
	case typeProxyGroup:
		if p.Owner == nil {
			return HandBackPlan{}, fmt.Errorf("ProxyGroup %s: no owner reference to give its Secrets", p.Name)
		}
		for _, s := range p.States {
			ordinal, ok := proxyset.OrdinalOf(p.Base, s.Name)
			if !ok {
				return HandBackPlan{}, fmt.Errorf("state Secret %s is no replica of %s", s.Name, p.Base)
			}
			name := p.Name + "-" + strconv.Itoa(ordinal)
			meta := func(name, secretType string) metav1.ObjectMeta {
				return metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: groupSecretLabels(p.Name, secretType),
					OwnerReferences: []metav1.OwnerReference{*p.Owner}}
			}
			plan.Replicas = append(plan.Replicas, HandBackReplica{From: s.Name,
				State:  &corev1.Secret{ObjectMeta: meta(name, proxyset.SecretTypeState), Type: corev1.SecretTypeOpaque, Data: Carried(s.Data)},
				Config: &corev1.Secret{ObjectMeta: meta(name+"-config", proxyset.SecretTypeConfig), Type: corev1.SecretTypeOpaque},
			})
		}
	default:
		return HandBackPlan{}, fmt.Errorf("the official operator has no proxies of parent type %q", p.Type)
	}
	return plan, nil
}

// officialChildLabels are the labels the official operator finds a single
// proxy's objects by (its childResourceLabels): a Connector's namespace
// label is empty.
func officialChildLabels(p HandBackProxy) map[string]string {
	ns := p.Namespace
	if p.Type == typeConnector {
		ns = ""
	}
	return map[string]string{
		proxystate.LabelManaged:         "true",
		proxystate.LabelParentName:      p.Name,
		proxystate.LabelParentNamespace: ns,
		proxystate.LabelParentType:      p.Type,
	}
}

// groupSecretLabels are the labels of the official operator's ProxyGroup
// Secrets (its pgSecretLabels).
func groupSecretLabels(group, secretType string) map[string]string {
	return map[string]string{
		proxystate.LabelManaged:    "true",
		proxystate.LabelParentType: typeProxyGroup,
		proxystate.LabelParentName: group,
		proxystate.LabelSecretType: secretType,
	}
}

func ptr[T any](v T) *T { return &v }

// The labels of the official operator's certificate Secrets of a
// ProxyGroup's Tailscale Services (its certResourceLabels and certSecret).
const (
	labelProxyGroup = "tailscale.com/proxy-group"
	labelDomain     = "tailscale.com/domain"
	secretTypeCerts = "certs"
)

// HandBackCert returns the Secret the official operator keeps the
// certificate of a ProxyGroup member's Tailscale Service in, made from
// Tailplane's shared certificate Secret of it (cert, labelled with the
// member's kind, namespace and name): named after the service's DNS name
// (the certificate's first name), labelled with the group, the name and
// the member, so that the official replicas serve it at once instead of
// issuing it again.
func HandBackCert(cert *corev1.Secret, memberKind, group, namespace string) (*corev1.Secret, error) {
	block, _ := pem.Decode(cert.Data[corev1.TLSCertKey])
	if block == nil || len(cert.Data[corev1.TLSPrivateKeyKey]) == 0 {
		return nil, fmt.Errorf("Secret %s holds no certificate yet", cert.Name)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("Secret %s: %w", cert.Name, err)
	}
	if len(c.DNSNames) == 0 {
		return nil, fmt.Errorf("Secret %s: the certificate names no host", cert.Name)
	}
	domain := c.DNSNames[0]
	l := map[string]string{
		proxystate.LabelManaged:    "true",
		labelProxyGroup:            group,
		labelDomain:                proxyset.TruncateLabelValue(domain),
		proxystate.LabelSecretType: secretTypeCerts,
		proxystate.LabelParentType: memberKind,
		proxystate.LabelParentName: cert.Labels[proxystate.LabelParentName],
	}
	if ns := cert.Labels[proxystate.LabelParentNamespace]; ns != "" {
		l[proxystate.LabelParentNamespace] = ns
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: domain, Namespace: namespace, Labels: l},
		Type:       corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: cert.Data[corev1.TLSCertKey],
			corev1.TLSPrivateKeyKey: cert.Data[corev1.TLSPrivateKeyKey]},
	}, nil
}
