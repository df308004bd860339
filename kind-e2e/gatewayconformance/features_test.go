package gatewayconformance

import (
	"sigs.k8s.io/gateway-api/conformance/utils/suite"
)

// profiles are the conformance profiles Tailplane runs (issue 34).
func profiles() []suite.ConformanceProfileName {
	return []suite.ConformanceProfileName{
		suite.GatewayHTTPConformanceProfileName, suite.GatewayGRPCConformanceProfileName, suite.GatewayTLSConformanceProfileName,
	}
}
