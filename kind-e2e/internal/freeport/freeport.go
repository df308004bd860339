// Package freeport picks TCP ports that are free right now, for the
// servers devcluster starts on loopback. It imports only the standard
// library.
package freeport

import (
	"fmt"
	"net"
)

// On returns n distinct TCP ports of host that are free right now. Every
// listener stays open until all n are chosen, so the ports differ; another
// process may still take one before the caller binds it.
func On(host string, n int) ([]int, error) {
	ports := make([]int, 0, n)
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	for range n {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return nil, fmt.Errorf("free port on %s: %w", host, err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
