package tailnet

import (
	"errors"
	"fmt"
)

// Feature is a part of the Tailscale control plane that some control
// servers lack. Handlers ask Supports before they depend on one, so that a
// parent needing it is refused with a message naming it instead of failing
// half-way.
type Feature string

// The features a backend may lack.
const (
	// FeatureServices are Tailscale Services (VIP services): ProxyGroups of
	// type ingress and kube-apiserver, and the Ingresses and Services they
	// serve, are built on them.
	FeatureServices Feature = "Tailscale Services"
	// FeatureCertificates are HTTPS certificates for a device's own
	// MagicDNS name, issued through the control server (the ts.net
	// certificates an Ingress without tls.secretName serves).
	FeatureCertificates Feature = "HTTPS certificates for MagicDNS names (ts.net certificates)"
	// FeatureFunnel is Tailscale Funnel: serving a device's port to the
	// internet (an Ingress with tailscale.com/funnel).
	FeatureFunnel Feature = "Tailscale Funnel"
)

// ErrUnsupported is wrapped by the errors of calls a backend cannot make
// because its control server lacks the feature.
var ErrUnsupported = errors.New("not supported by this control server")

// FeatureSet is implemented by backends whose control server lacks some
// features; a backend that does not implement it has them all.
type FeatureSet interface {
	// Supports reports whether the control server has f.
	Supports(f Feature) bool
	// ControlName names the kind of control server in messages
	// ("Headscale").
	ControlName() string
}

// Supports reports whether b's control server has f.
func Supports(b Backend, f Feature) bool {
	fs, ok := b.(FeatureSet)
	return !ok || fs.Supports(f)
}

// Unsupported returns "" when b has every feature in fs, else a sentence
// naming the first one missing, its control server, and what needs it.
func Unsupported(b Backend, neededBy string, fs ...Feature) string {
	for _, f := range fs {
		if !Supports(b, f) {
			return fmt.Sprintf("%s needs %s, which the control server (%s at %s) does not have", neededBy, f, b.(FeatureSet).ControlName(), b.LoginServer())
		}
	}
	return ""
}

// unsupportedError is the error of a call on a missing feature.
func unsupportedError(control string, f Feature, op string) error {
	return fmt.Errorf("tailnet: %s: %s has no %s: %w", op, control, f, ErrUnsupported)
}
