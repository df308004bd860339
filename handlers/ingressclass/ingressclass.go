// Package ingressclass is the handler module that checks the IngressClass
// the operator serves. This file is its pure part: a class of that name marked
// as the cluster's default (ingressclass.kubernetes.io/is-default-class) is
// refused, because Ingresses without a class (k3s's Traefik ones, say) must
// never land on the tailnet; the official operator documents the same rule.
//
// register.go is the thin apply step (Register), which imports runtime/ and
// handlers/lib/cluster as well; the check itself imports only Kubernetes API types.
package ingressclass

import (
	"fmt"

	networkingv1 "k8s.io/api/networking/v1"
)

// Names used by the check.
const (
	// Controller is the controller name of the tailscale IngressClass.
	Controller = "tailscale.com/ts-ingress"
	// AnnotationDefault marks the cluster's default IngressClass.
	AnnotationDefault = networkingv1.AnnotationIsDefaultIngressClass
	// ReasonDefaultClassRefused is the Warning Event reason on the class and
	// on its Ingresses while the class is marked default.
	ReasonDefaultClassRefused = "DefaultIngressClassRefused"
	// ReasonInvalidIngressClass is the Warning Event reason for a class
	// whose controller is not Controller.
	ReasonInvalidIngressClass = "InvalidIngressClass"
)

// Verdict is the outcome of checking the IngressClass.
type Verdict struct {
	// Refused means Ingresses of the class are not served.
	Refused bool
	// ClassMessage is the Warning Event for the IngressClass (empty: none).
	ClassMessage string
	// IngressMessage is the Warning Event for each Ingress of the class
	// (empty: none).
	IngressMessage string
	// Reason is the Event reason for both.
	Reason string
}

// Check judges the IngressClass named className (nil when it does not
// exist). A missing class or one with another controller only warns, as in
// the official operator; a class marked default is refused until the mark
// is removed.
func Check(class *networkingv1.IngressClass, className string) Verdict {
	if class == nil {
		return Verdict{Reason: ReasonInvalidIngressClass,
			IngressMessage: fmt.Sprintf("IngressClass %q does not exist; create it (controller %s) so that other tools see who serves this Ingress", className, Controller)}
	}
	if class.Annotations[AnnotationDefault] == "true" {
		return Verdict{
			Refused: true, Reason: ReasonDefaultClassRefused,
			ClassMessage: fmt.Sprintf("IngressClass %q is marked as the default class (%s: \"true\"); the operator does not serve a default IngressClass, so that Ingresses without a class never reach the tailnet: remove the annotation",
				className, AnnotationDefault),
			IngressMessage: fmt.Sprintf("not served: IngressClass %q is marked as the default class (%s); it will be served once the annotation is removed",
				className, AnnotationDefault),
		}
	}
	if class.Spec.Controller != Controller {
		msg := fmt.Sprintf("IngressClass %q has controller %q, want %q", className, class.Spec.Controller, Controller)
		return Verdict{Reason: ReasonInvalidIngressClass, ClassMessage: msg, IngressMessage: msg}
	}
	return Verdict{}
}
