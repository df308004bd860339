package echobasic

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"

	"github.com/charmbracelet/log"
)

// TCPWelcome is the TCP echo's first line on every connection.
const TCPWelcome = "Gateway API Test TCP Server\n"

// TCPContext is the TCP echo's pod context: echo-basic's tcpserver adds
// its ports.
type TCPContext struct {
	PodContext
	TCPPort string `json:"tcpport"`
	TLSPort string `json:"tlsport,omitempty,omitzero"`
}

// TCPAssertions is the TCP echo's answer to "TEST".
type TCPAssertions struct {
	TCPContext `json:",inline"`
	IsTLS      bool              `json:"isTLS"`
	TLS        *TCPTLSAssertions `json:"tls,omitempty,omitzero"`
}

// TCPTLSAssertions are the TLS facts of a TCP echo connection, named as
// tcpserver names them (tls.VersionName, not the HTTP echo's names).
type TCPTLSAssertions struct {
	Version            string `json:"version"`
	ServerName         string `json:"serverName"`
	NegotiatedProtocol string `json:"negotiatedProtocol,omitempty,omitzero"`
	Curves             string `json:"curves,omitempty,omitzero"`
	CipherSuite        string `json:"cipherSuite"`
}

// UDPEcho is the UDP echo's answer to a datagram.
type UDPEcho struct {
	Request    string `json:"request"`
	PodContext `json:",inline"`
}

func startTCP(ctx context.Context, c Config, s *Servers, logger *log.Logger) error {
	pc := TCPContext{PodContext: c.Context, TCPPort: c.TCPPort, TLSPort: c.TLSPort}
	l, err := s.listen(ctx, "tcp", c.Host, c.TCPPort)
	if err != nil {
		return err
	}
	s.serve("tcp", func() error { return acceptLoop(ctx, l, pc, logger) })
	if !c.tls() {
		return nil
	}
	cfg, err := serverTLS(c.CertFile, c.KeyFile, "")
	if err != nil {
		return err
	}
	cfg.MinVersion = tls.VersionTLS12
	tl, err := s.listen(ctx, "tls", c.Host, c.TLSPort)
	if err != nil {
		return err
	}
	s.serve("tls", func() error { return acceptLoop(ctx, tls.NewListener(tl, cfg), pc, logger) })
	return nil
}

func acceptLoop(ctx context.Context, l net.Listener, pc TCPContext, logger *log.Logger) error {
	for {
		conn, err := l.Accept()
		if err != nil {
			return fmt.Errorf("accept: %w", err)
		}
		go func() {
			if err := tcpEcho(ctx, conn, pc); err != nil {
				logger.Debug("tcp echo", "remote", conn.RemoteAddr(), "err", err)
			}
		}()
	}
}

// tcpEcho greets, then answers TEST with the assertions, IS_TLS with
// true or false and PING with PONG, one line each.
func tcpEcho(ctx context.Context, conn net.Conn, pc TCPContext) error {
	defer conn.Close()
	a := TCPAssertions{TCPContext: pc}
	if tc, ok := conn.(*tls.Conn); ok {
		if err := tc.HandshakeContext(ctx); err != nil {
			return fmt.Errorf("TLS handshake: %w", err)
		}
		st := tc.ConnectionState()
		a.IsTLS = true
		a.TLS = &TCPTLSAssertions{
			Version: tls.VersionName(st.Version), ServerName: st.ServerName, NegotiatedProtocol: st.NegotiatedProtocol,
			Curves: st.CurveID.String(), CipherSuite: tls.CipherSuiteName(st.CipherSuite),
		}
	}
	payload, err := json.Marshal(a)
	if err != nil {
		return fmt.Errorf("encode the assertions: %w", err)
	}
	if _, err := io.WriteString(conn, TCPWelcome); err != nil {
		return fmt.Errorf("greet: %w", err)
	}
	lines := bufio.NewScanner(conn)
	for lines.Scan() {
		var answer string
		switch lines.Text() {
		case "TEST":
			answer = string(payload) + "\n"
		case "IS_TLS":
			answer = fmt.Sprintf("%t\n", a.IsTLS)
		case "PING":
			answer = "PONG\n"
		default:
			continue
		}
		if _, err := io.WriteString(conn, answer); err != nil {
			return fmt.Errorf("answer: %w", err)
		}
	}
	if err := lines.Err(); err != nil {
		return fmt.Errorf("read: %w", err)
	}
	return nil
}

func startUDP(ctx context.Context, c Config, s *Servers, logger *log.Logger) error {
	pc, err := (&net.ListenConfig{}).ListenPacket(ctx, "udp", net.JoinHostPort(c.Host, c.UDPPort))
	if err != nil {
		return fmt.Errorf("udp: %w", err)
	}
	s.Addrs["udp"] = pc.LocalAddr().String()
	s.stops = append(s.stops, func() { _ = pc.Close() })
	s.serve("udp", func() error {
		buf := make([]byte, 1024)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return fmt.Errorf("read: %w", err)
			}
			payload, err := json.Marshal(UDPEcho{Request: string(buf[:n]), PodContext: c.Context})
			if err != nil {
				return fmt.Errorf("encode: %w", err)
			}
			if _, err := pc.WriteTo(payload, from); err != nil {
				logger.Debug("udp echo", "to", from, "err", err)
			}
		}
	})
	return nil
}
