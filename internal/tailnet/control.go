package tailnet

// ControlHeadscale is the ControlName of Headscale backends.
const ControlHeadscale = "Headscale"

// IsHeadscale reports whether b's control server is Headscale, so that a
// message telling a person what to do names Headscale's CLI rather than
// Tailscale's admin console.
func IsHeadscale(b Backend) bool {
	fs, ok := b.(FeatureSet)
	return ok && fs.ControlName() == ControlHeadscale
}
