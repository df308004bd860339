// Package bench measures the operator at scale (go tool task bench:operator):
// the real tailplane-operator binary against a real kube-apiserver (testenv)
// and the fake tailnet API, with 500 exposed Services created at once. It
// reports the time until every proxy's StatefulSet and config Secret exists
// and the operator's peak RSS.
//
// It imports internal/testenv, internal/tailnet/tailnettest and client-go;
// it is test-only.
package bench
