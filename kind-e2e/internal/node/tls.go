package node

import "crypto/tls"

// insecureTLS is for HTTPS probes only: the kubelet does not verify
// certificates of probed containers either.
func insecureTLS() *tls.Config { return &tls.Config{InsecureSkipVerify: true} } //nolint:gosec
