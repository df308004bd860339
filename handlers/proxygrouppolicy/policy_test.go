package proxygrouppolicy

import (
	"reflect"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"

	"github.com/tailplane/tailplane/crds/tailscale/v1alpha1"
)

func TestMergeUnitesSortsAndDeduplicates(t *testing.T) {
	ingress, egress := Merge([]v1alpha1.ProxyGroupPolicy{
		{Spec: v1alpha1.ProxyGroupPolicySpec{Ingress: []string{"web", "api"}, Egress: []string{"db"}}},
		{Spec: v1alpha1.ProxyGroupPolicySpec{Ingress: []string{"api"}}},
		{},
	})
	if !reflect.DeepEqual(ingress, []string{"api", "web"}) || !reflect.DeepEqual(egress, []string{"db"}) {
		t.Fatalf("Merge = %v, %v", ingress, egress)
	}
	if ingress, egress := Merge([]v1alpha1.ProxyGroupPolicy{{}}); ingress == nil || len(ingress) != 0 || len(egress) != 0 {
		t.Fatalf("deny-all Merge = %#v, %#v, want empty lists", ingress, egress)
	}
}

// The objects, names, matches and messages are the official operator's.
func TestRenderMatchesTheOfficialPolicies(t *testing.T) {
	objs := Render("team-a", []string{"api", "web"}, nil)
	if len(objs) != 4 {
		t.Fatalf("%d objects, want 4", len(objs))
	}
	ing, ingB := objs[0].(*admissionv1.ValidatingAdmissionPolicy), objs[1].(*admissionv1.ValidatingAdmissionPolicyBinding)
	eg, egB := objs[2].(*admissionv1.ValidatingAdmissionPolicy), objs[3].(*admissionv1.ValidatingAdmissionPolicyBinding)
	if ing.Name != "ts-ingress-team-a" || ingB.Name != ing.Name || ingB.Spec.PolicyName != ing.Name ||
		eg.Name != "ts-egress-team-a" || egB.Name != eg.Name || egB.Spec.PolicyName != eg.Name {
		t.Fatalf("names: %s %s %s %s", ing.Name, ingB.Name, eg.Name, egB.Name)
	}
	for _, b := range []*admissionv1.ValidatingAdmissionPolicyBinding{ingB, egB} {
		if !reflect.DeepEqual(b.Spec.ValidationActions, []admissionv1.ValidationAction{admissionv1.Deny}) ||
			b.Spec.MatchResources.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != "team-a" {
			t.Errorf("binding %s: %+v", b.Name, b.Spec)
		}
	}
	for _, p := range []*admissionv1.ValidatingAdmissionPolicy{ing, eg} {
		if *p.Spec.FailurePolicy != admissionv1.Fail {
			t.Errorf("%s: failurePolicy %v", p.Name, *p.Spec.FailurePolicy)
		}
	}
	if n := len(ing.Spec.MatchConstraints.ResourceRules); n != 2 || ing.Spec.MatchConstraints.ResourceRules[0].Resources[0] != "ingresses" {
		t.Errorf("ingress policy rules: %+v", ing.Spec.MatchConstraints.ResourceRules)
	}
	if r := eg.Spec.MatchConstraints.ResourceRules; len(r) != 1 || r[0].Resources[0] != "services" {
		t.Errorf("egress policy rules: %+v", r)
	}
	for _, v := range ing.Spec.Validations {
		if v.Message != `If set, annotation "tailscale.com/proxy-group" must be one of [api, web]` || !strings.Contains(v.Expression, `in ["api","web"]`) {
			t.Errorf("ingress validation %+v", v)
		}
	}
	if v := eg.Spec.Validations; len(v) != 1 || v[0].Message != `Annotation "tailscale.com/proxy-group" cannot be used on this resource in this namespace` ||
		!strings.Contains(v[0].Expression, "in []") {
		t.Errorf("deny-all egress validation %+v", v)
	}
}
