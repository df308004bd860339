package proxygroup

import (
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tailplane/tailplane/crds/tailscale/v1alpha1"
	"github.com/tailplane/tailplane/handlers/lib/groupmember"
	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/handlers/lib/tsservice"
	"github.com/tailplane/tailplane/proxy/config"
)

// Conditions and reasons of kube-apiserver groups (the official ones).
const (
	ConditionAPIServerValid      = "KubeAPIServerProxyValid"
	ConditionAPIServerConfigured = "KubeAPIServerProxyConfigured"
	ReasonAPIServerValid         = "KubeAPIServerProxyValid"
	reasonAPIServerInvalid       = "KubeAPIServerProxyInvalid"
	ReasonAPIServerConfigured    = "KubeAPIServerProxyConfigured"
	reasonAPIServerNoBackends    = "KubeAPIServerProxyNoBackends"

	// impersonatorClusterRole is the chart's ClusterRole that lets a
	// kube-apiserver group in auth mode impersonate its callers; the
	// operator binds it to the group's ServiceAccount.
	impersonatorClusterRole = "tailplane-kube-apiserver-proxy"
)

// apiServerHostname is the Tailscale Service label of a kube-apiserver
// group: spec.kubeAPIServer.hostname, else the group's name.
func apiServerHostname(pg *v1alpha1.ProxyGroup) string {
	if k := pg.Spec.KubeAPIServer; k != nil && k.Hostname != "" {
		return k.Hostname
	}
	return pg.Name
}

// apiServerMode is spec.kubeAPIServer.mode, auth by default.
func apiServerMode(pg *v1alpha1.ProxyGroup) config.APIServerMode {
	if k := pg.Spec.KubeAPIServer; k != nil && k.Mode != nil && *k.Mode == v1alpha1.APIServerProxyModeNoAuth {
		return config.APIServerNoAuth
	}
	return config.APIServerAuth
}

// apiServerConfig is replica ordinal's config of a kube-apiserver group:
// the API server under svc:<hostname>; replica 0 issues the certificate.
func apiServerConfig(pg *v1alpha1.ProxyGroup, tags []string, ordinal int) *config.Config {
	h := apiServerHostname(pg)
	return &config.Config{
		Version: config.Version, Hostname: hostnames(pg)[ordinal], Tags: tags,
		Role: config.RoleKubeAPIServer,
		APIServer: &config.APIServer{Mode: apiServerMode(pg), ServiceName: "svc:" + h,
			TLS: config.TLS{Mode: config.TLSShared, SecretName: tsservice.CertSecretName(h), Issue: ordinal == 0}},
	}
}

// apiServerMember is the group itself as the owner of its Tailscale
// Service, with the ownership rules of the members that own theirs.
func apiServerMember(pg *v1alpha1.ProxyGroup, tags []string) *groupmember.ServiceMember {
	return &groupmember.ServiceMember{Kind: "ProxyGroup", Name: pg.Name, UID: pg.UID, Group: pg.Name, Hostname: apiServerHostname(pg),
		Tags: tags, Ports: []string{"tcp:443"}}
}

// impersonatorBinding binds impersonatorClusterRole to the group's
// ServiceAccount (auth mode only).
func impersonatorBinding(pg *v1alpha1.ProxyGroup, namespace string) *rbacv1.ClusterRoleBinding {
	sa := proxyset.Parent{Type: groupmember.ParentType, Name: pg.Name}.Names().Base
	return &rbacv1.ClusterRoleBinding{
		TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: ImpersonatorBindingName(pg.Name),
			Labels: proxyset.Parent{Type: groupmember.ParentType, Name: pg.Name}.OfficialLabels()},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: impersonatorClusterRole},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: namespace}},
	}
}

// ImpersonatorBindingName names a group's ClusterRoleBinding.
func ImpersonatorBindingName(group string) string { return "tailplane-kube-apiserver-" + group }

// apiServerURL is status.url: https://<hostname>.<tailnet domain>, "" until
// the domain is known.
func apiServerURL(pg *v1alpha1.ProxyGroup, domain string) string {
	if domain == "" {
		return ""
	}
	return fmt.Sprintf("https://%s.%s", apiServerHostname(pg), domain)
}
