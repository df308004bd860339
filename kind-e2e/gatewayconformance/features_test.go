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

// claimedFeatures are the features Tailplane claims: the profiles' core
// features, and no extended one yet. Naming them keeps the suite from
// inferring them from the GatewayClass's status.supportedFeatures, which is
// empty until Gateways are served (the suite refuses an empty inference).
// An extended feature joins this list once it is served, and the class's
// status with it.
func claimedFeatures() []features.FeatureName {
	return []features.FeatureName{
		features.SupportGateway, features.SupportReferenceGrant,
		features.SupportHTTPRoute, features.SupportGRPCRoute, features.SupportTLSRoute,
	}
}
