// Package gatewayclass is the handler module of the Gateway API's
// GatewayClass: the classes whose spec.controllerName is ControllerName are
// accepted (conditions Accepted and SupportedVersion) and publish the
// features the operator serves (status.supportedFeatures). A class of any
// other controller is never touched. This file is its pure part: the status
// a class should have.
//
// register.go is the thin apply step (Register), which imports runtime/ and
// handlers/lib as well; this file imports only the Gateway API's types
// (sigs.k8s.io/gateway-api/apis/v1, pkg/consts), handlers/lib/conditions,
// handlers/lib/gatewayapi (the controller's name) and apimachinery.
package gatewayclass

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/gateway-api/pkg/consts"

	"github.com/tailplane/tailplane/handlers/lib/conditions"
	"github.com/tailplane/tailplane/handlers/lib/gatewayapi"
)

// ControllerName is the spec.controllerName of the GatewayClasses the
// operator serves.
const ControllerName = gatewayapi.ControllerName

// CRDName is the GatewayClass CRD, whose bundle-version annotation says
// which Gateway API release is installed.
const CRDName = "gatewayclasses.gateway.networking.k8s.io"

// BundleVersion is the Gateway API release the operator is built against
// (sigs.k8s.io/gateway-api in go.mod); SupportedVersion is True for CRDs of
// the same minor release.
const BundleVersion = consts.BundleVersion

// Condition types and reasons, the Gateway API's own.
const (
	ConditionAccepted         = string(gatewayv1.GatewayClassConditionStatusAccepted)
	ReasonAccepted            = string(gatewayv1.GatewayClassReasonAccepted)
	ConditionSupportedVersion = string(gatewayv1.GatewayClassConditionStatusSupportedVersion)
	ReasonSupportedVersion    = string(gatewayv1.GatewayClassReasonSupportedVersion)
	ReasonUnsupportedVersion  = string(gatewayv1.GatewayClassReasonUnsupportedVersion)
)

// SupportedFeatures are the Gateway API features (pkg/features' names, as
// the conformance suite reads them) the operator serves, sorted by name as
// the API requires: the core features of the GATEWAY-HTTP, GATEWAY-GRPC and
// GATEWAY-TLS profiles, and each extended feature whose conformance tests
// pass on devcluster (docs/gateway.md, "Conformance"). The conformance
// runner (kind-e2e/gatewayconformance) claims exactly what the class
// publishes, so CI fails if one of these stops passing.
func SupportedFeatures() []gatewayv1.SupportedFeature {
	names := []gatewayv1.FeatureName{
		"Gateway", "GatewayHTTPListenerIsolation", "GatewayPort8080",
		"GRPCRoute",
		"HTTPRoute", "HTTPRoute303RedirectStatusCode", "HTTPRoute307RedirectStatusCode", "HTTPRoute308RedirectStatusCode",
		"HTTPRouteBackendProtocolH2C", "HTTPRouteBackendProtocolWebSocket", "HTTPRouteBackendTimeout",
		"HTTPRouteDestinationPortMatching", "HTTPRouteHostRewrite", "HTTPRouteMethodMatching", "HTTPRouteNamedRouteRule",
		"HTTPRouteParentRefPort", "HTTPRoutePathRedirect", "HTTPRoutePathRewrite", "HTTPRoutePortRedirect",
		"HTTPRouteQueryParamMatching", "HTTPRouteRequestMirror", "HTTPRouteRequestMultipleMirrors",
		"HTTPRouteRequestPercentageMirror", "HTTPRouteRequestTimeout", "HTTPRouteResponseHeaderModification",
		"HTTPRouteSchemeRedirect",
		"ReferenceGrant", "TLSRoute",
	}
	slices.Sort(names)
	out := make([]gatewayv1.SupportedFeature, len(names))
	for i, n := range names {
		out[i] = gatewayv1.SupportedFeature{Name: n}
	}
	return out
}

// IsOurs reports whether the class names the operator's controller.
func IsOurs(gc *gatewayv1.GatewayClass) bool { return gc.Spec.ControllerName == ControllerName }

// Status is the status class gc of ours should have, given the
// bundle-version annotation of the installed GatewayClass CRD ("" when it
// has none). Conditions of other types are kept as they are; ours keep
// their transition time while their status holds. ok is false when a
// condition of ours was written for a newer generation than gc's (gc is a
// stale copy): the API then asks for no update until the newer one is seen.
func Status(gc *gatewayv1.GatewayClass, bundleVersion string) (status gatewayv1.GatewayClassStatus, ok bool) {
	have := gc.Status.Conditions
	for _, c := range have {
		if (c.Type == ConditionAccepted || c.Type == ConditionSupportedVersion) && c.ObservedGeneration > gc.Generation {
			return gc.Status, false
		}
	}
	gen := gc.Generation
	conds := conditions.Set(have, metav1.Condition{
		Type: ConditionAccepted, Status: metav1.ConditionTrue, Reason: ReasonAccepted, ObservedGeneration: gen,
		Message: fmt.Sprintf("accepted by %s", ControllerName),
	})
	version := metav1.Condition{
		Type: ConditionSupportedVersion, Status: metav1.ConditionTrue, Reason: ReasonSupportedVersion, ObservedGeneration: gen,
		Message: fmt.Sprintf("Gateway API CRDs of bundle version %s are supported", bundleVersion),
	}
	if !sameMinor(bundleVersion, BundleVersion) {
		// Accepted stays True: best effort, as the API allows.
		version.Status, version.Reason = metav1.ConditionFalse, ReasonUnsupportedVersion
		found := fmt.Sprintf("bundle version %q", bundleVersion)
		if bundleVersion == "" {
			found = "no " + "gateway.networking.k8s.io/bundle-version annotation"
		}
		version.Message = fmt.Sprintf("the GatewayClass CRD has %s; Tailplane supports Gateway API %s.x (built against %s)",
			found, minor(BundleVersion), BundleVersion)
	}
	conds = conditions.Set(conds, version)
	return gatewayv1.GatewayClassStatus{Conditions: conds, SupportedFeatures: SupportedFeatures()}, true
}

// minor is "v1.6" of "v1.6.3".
func minor(v string) string {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return v
	}
	return parts[0] + "." + parts[1]
}

func sameMinor(a, b string) bool {
	return a != "" && strings.Count(a, ".") == 2 && minor(a) == minor(b)
}

// ClassObject is the GatewayClass the operator creates when asked
// (Settings.GatewayClassName): name, of ControllerName.
func ClassObject(name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gatewayv1.GroupVersion.String(), "kind": "GatewayClass",
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"controllerName": string(ControllerName)},
	}}
}
