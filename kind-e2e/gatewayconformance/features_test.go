package gatewayconformance

import (
	"sigs.k8s.io/gateway-api/conformance/utils/suite"
	"sigs.k8s.io/gateway-api/pkg/features"
)

// profiles are the conformance profiles Tailplane runs (issue 34).
func profiles() []suite.ConformanceProfileName {
	return []suite.ConformanceProfileName{
		suite.GatewayHTTPConformanceProfileName, suite.GatewayGRPCConformanceProfileName, suite.GatewayTLSConformanceProfileName,
	}
}

// claimedFeatures are the features Tailplane claims, the same as the
// GatewayClass's status.supportedFeatures (handlers/gatewayclass): the core
// features of the profiles whose core tests all pass (GATEWAY-GRPC), and no
// extended one yet. HTTPRoute and TLSRoute join when their profiles' core
// tests pass; until then a run checks them with the suite's own flag,
// -supported-features=Gateway,ReferenceGrant,HTTPRoute,GRPCRoute,TLSRoute
// (docs/gateway.md, "Conformance"). Naming them keeps the suite from
// inferring them from the class.
func claimedFeatures() []features.FeatureName {
	return []features.FeatureName{features.SupportGRPCRoute, features.SupportGateway, features.SupportReferenceGrant}
}
