package proxy

import (
	"fmt"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
)

// timeWait is how long the proxy's userspace network stack keeps a closed
// TCP connection in TIME_WAIT, instead of gVisor's 60 s default.
//
// Tailscale's netstack accepts tailnet connections through a forwarder, not
// through gVisor listening endpoints. A SYN that reuses the addresses and
// ports of a connection in TIME_WAIT is handed to a listening endpoint if
// there is one; without one it is dropped, and so is every retransmission
// of it until TIME_WAIT ends. Clients on a userspace stack (tsnet, the
// Tailscale apps on some platforms) pick random ephemeral ports, so a client
// making many short connections lands on one of them now and then: with
// 60 s that connection attempt times out (one request in about 500 of the
// Gateway API conformance suite's HTTPRouteWeight). With one second it is
// answered on the client's first SYN retransmission. The risk TIME_WAIT
// guards against, an old duplicate segment taken into a new connection,
// needs a segment delayed by more than that inside a WireGuard tunnel whose
// new connections start at time-based sequence numbers.
const timeWait = time.Second

// transportOptionSetter is what takes transport protocol options: gVisor's
// stack, and Tailscale's netstack in front of it.
type transportOptionSetter interface {
	SetTransportProtocolOption(tcpip.TransportProtocolNumber, tcpip.SettableTransportProtocolOption) tcpip.Error
}

// shortenTimeWait sets the stack's TCP TIME_WAIT to timeWait.
func shortenTimeWait(s transportOptionSetter) error {
	opt := tcpip.TCPTimeWaitTimeoutOption(timeWait)
	if err := s.SetTransportProtocolOption(tcp.ProtocolNumber, &opt); err != nil {
		return fmt.Errorf("set the TCP TIME_WAIT timeout to %s: %s", timeWait, err)
	}
	return nil
}
