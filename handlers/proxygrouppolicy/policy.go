// Package proxygrouppolicy is the handler module of the ProxyGroupPolicy
// kind: the policies of a namespace, merged, become two
// ValidatingAdmissionPolicies and their bindings, which the API server uses
// to refuse a Service or Ingress of that namespace naming a ProxyGroup
// (annotation tailscale.com/proxy-group) the policies do not allow. The
// objects, their names and their messages are the official operator's; the
// rules also accept objects without annotations (the official ones fail on
// them).
//
// This file is the pure part (merge and render); register.go applies it. It
// imports crds/ and Kubernetes API types; register.go also runtime/ and
// handlers/lib/cluster.
package proxygrouppolicy

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tailplane/tailplane/crds/tailscale/v1alpha1"
)

// AnnotationProxyGroup names the ProxyGroup a Service or Ingress uses.
const AnnotationProxyGroup = "tailscale.com/proxy-group"

// Condition reasons on a ProxyGroupPolicy (type
// v1alpha1.ProxyGroupPolicyReady), also the reason of the Warning Event when
// the admission policies cannot be written.
const (
	ReasonEnforced    = "ProxyGroupPolicyEnforced"
	ReasonNotEnforced = "ProxyGroupPolicyNotEnforced"
)

// The official messages of a refusal.
const (
	denyAllMessage = `Annotation "tailscale.com/proxy-group" cannot be used on this resource in this namespace`
	allowFormat    = `If set, annotation "tailscale.com/proxy-group" must be one of [%s]`
)

// IngressName and EgressName are the names of a namespace's admission
// policies, each with a binding of the same name.
func IngressName(namespace string) string { return "ts-ingress-" + namespace }

// EgressName: see IngressName.
func EgressName(namespace string) string { return "ts-egress-" + namespace }

// Merge returns the ProxyGroups that the policies allow, each list sorted
// and without duplicates; several policies in a namespace add up.
func Merge(policies []v1alpha1.ProxyGroupPolicy) (ingress, egress []string) {
	ingress, egress = []string{}, []string{}
	for _, p := range policies {
		ingress = append(ingress, p.Spec.Ingress...)
		egress = append(egress, p.Spec.Egress...)
	}
	slices.Sort(ingress)
	slices.Sort(egress)
	return slices.Compact(ingress), slices.Compact(egress)
}

// The CEL rules. The annotation test comes first so that an object without
// annotations is accepted: the official rules index
// object.metadata.annotations unguarded, which fails (and with
// failurePolicy Fail refuses the object) when there are none.
const (
	// hasGroup: the object names a ProxyGroup.
	hasGroup = `has(object.metadata.annotations) && "tailscale.com/proxy-group" in object.metadata.annotations`
	// exposed: a Service served to the tailnet (ingress), as opposed to
	// one reaching into it (egress).
	exposed = `((has(object.spec.loadBalancerClass) && object.spec.loadBalancerClass == "tailscale") || ` +
		`(has(object.metadata.annotations) && "tailscale.com/expose" in object.metadata.annotations && object.metadata.annotations["tailscale.com/expose"] == "true"))`
	allowed = `object.metadata.annotations["tailscale.com/proxy-group"] in [%s]`

	ingressRule        = `request.kind.kind != "Ingress" || !(` + hasGroup + `) || ` + allowed
	ingressServiceRule = `request.kind.kind != "Service" || !` + exposed + ` || !(` + hasGroup + `) || ` + allowed
	egressRule         = exposed + ` || !(` + hasGroup + `) || ` + allowed
)

// Render returns the admission policies and bindings of a namespace that
// allow the given ProxyGroups (see Merge): ts-ingress-<namespace> for
// Ingresses and exposed Services, ts-egress-<namespace> for the other
// Services; in that order, each policy before its binding.
func Render(namespace string, ingress, egress []string) []any {
	services := rule("", "v1", "services")
	ingressPolicy := policy(IngressName(namespace), []admissionv1.NamedRuleWithOperations{rule("networking.k8s.io", "*", "ingresses"), services},
		validation(ingress, ingressRule), validation(ingress, ingressServiceRule))
	egressPolicy := policy(EgressName(namespace), []admissionv1.NamedRuleWithOperations{services}, validation(egress, egressRule))
	return []any{ingressPolicy, binding(ingressPolicy.Name, namespace), egressPolicy, binding(egressPolicy.Name, namespace)}
}

func rule(group, version, resource string) admissionv1.NamedRuleWithOperations {
	return admissionv1.NamedRuleWithOperations{RuleWithOperations: admissionv1.RuleWithOperations{
		Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
		Rule:       admissionv1.Rule{APIGroups: []string{group}, APIVersions: []string{version}, Resources: []string{resource}},
	}}
}

func policy(name string, rules []admissionv1.NamedRuleWithOperations, validations ...admissionv1.Validation) *admissionv1.ValidatingAdmissionPolicy {
	fail := admissionv1.Fail
	return &admissionv1.ValidatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "ValidatingAdmissionPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy:    &fail,
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: rules},
			Validations:      validations,
		},
	}
}

func binding(name, namespace string) *admissionv1.ValidatingAdmissionPolicyBinding {
	return &admissionv1.ValidatingAdmissionPolicyBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "ValidatingAdmissionPolicyBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
			MatchResources: &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": namespace},
			}},
		},
	}
}

// validation fills the allowed names into a rule, with the official
// message: the names, or that none is allowed.
func validation(names []string, format string) admissionv1.Validation {
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = strconv.Quote(n)
	}
	msg := fmt.Sprintf(allowFormat, strings.Join(names, ", "))
	if len(names) == 0 {
		msg = denyAllMessage
	}
	return admissionv1.Validation{Expression: fmt.Sprintf(format, strings.Join(quoted, ",")), Message: msg}
}
