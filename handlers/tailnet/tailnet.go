// Package tailnet is the handler module of the Tailnet kind: a Tailnet names
// the Secret (in the operator namespace) of an OAuth client of another
// tailnet, and its control server (spec.loginUrl). The module reads the
// Secret, builds a backend for that tailnet, probes the permissions the
// operator needs as the official operator does (list devices, auth keys and
// Tailscale Services), and reports the result in the TailnetReady condition
// (reasons TailnetValid, InvalidSecret, InvalidOAuth) with Events on failure.
// A valid Tailnet's backend goes into the shared registry (cluster.Deps.Tailnets)
// under its name, where the proxy pipeline finds it for ProxyGroups and
// Connectors with spec.tailnet.
//
// This file is the pure part (the Secret's rules, the condition); register.go
// applies it. It imports crds/ and Kubernetes API types; register.go also
// runtime/, handlers/lib/cluster and internal/tailnet.
package tailnet

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tailplane/tailplane/crds/tailscale/v1alpha1"
)

// Condition reasons of TailnetReady, the official ones; the failure reasons
// are also the reasons of the Warning Events.
const (
	ReasonValid         = "TailnetValid"
	ReasonInvalidSecret = "InvalidSecret"
	ReasonInvalidOAuth  = "InvalidOAuth"
)

// Keys of the credentials Secret, the official ones.
const (
	KeyClientID     = "client_id"
	KeyClientSecret = "client_secret"
	KeyAudience     = "audience"
)

// Credentials are a Tailnet's OAuth client: a client secret, or an
// audience for workload identity federation (the operator's ServiceAccount
// tokens for that audience are exchanged for API tokens).
type Credentials struct {
	ClientID, ClientSecret, Audience string
}

// SecretMissing is the message of a Tailnet whose Secret does not exist.
func SecretMissing(name, namespace string) string {
	return fmt.Sprintf("referenced secret %q does not exist in namespace %q", name, namespace)
}

// ReadSecret returns the OAuth client in s, or why s cannot be used (the
// official messages). An audience, as with the official operator, makes it
// a workload identity federation client and wins over a client secret.
func ReadSecret(s *corev1.Secret) (Credentials, string) {
	switch {
	case len(s.Data) == 0:
		return Credentials{}, fmt.Sprintf("Secret %q is empty", s.Name)
	case len(s.Data[KeyClientID]) == 0:
		return Credentials{}, fmt.Sprintf("Secret %q is missing the client_id field", s.Name)
	case len(s.Data[KeyAudience]) > 0:
		return Credentials{ClientID: string(s.Data[KeyClientID]), Audience: string(s.Data[KeyAudience])}, ""
	case len(s.Data[KeyClientSecret]) == 0:
		return Credentials{}, fmt.Sprintf("Secret %q must contain either a client_secret or an audience field", s.Name)
	}
	return Credentials{ClientID: string(s.Data[KeyClientID]), ClientSecret: string(s.Data[KeyClientSecret])}, ""
}

// Probe is one of the permission checks: what failed and the API's error.
type Probe struct {
	// What is "list devices", "list auth keys" or "list tailscale services".
	What string
	Err  error
}

// ProbeMessage joins the failed checks into InvalidOAuth's message (""
// when none failed), as the official operator words it.
func ProbeMessage(probes []Probe) string {
	var errs []error
	for _, p := range probes {
		if p.Err != nil {
			errs = append(errs, fmt.Errorf("failed to %s: %w", p.What, p.Err))
		}
	}
	if len(errs) == 0 {
		return ""
	}
	return errors.Join(errs...).Error()
}

// Ready is the TailnetReady condition at generation: True with TailnetValid
// when reason is ReasonValid, else False with reason and message.
func Ready(reason, message string, generation int64) metav1.Condition {
	c := metav1.Condition{Type: v1alpha1.TailnetReady, Status: metav1.ConditionFalse, Reason: reason, Message: message,
		ObservedGeneration: generation}
	if reason == ReasonValid {
		c.Status, c.Message = metav1.ConditionTrue, ReasonValid
	}
	return c
}

// IsReady reports whether conds hold TailnetReady True.
func IsReady(conds []metav1.Condition) bool {
	for _, c := range conds {
		if c.Type == v1alpha1.TailnetReady {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
}
