// Command tcpnode is the data end of the connector benchmark: on port
// -source-port every connection receives -size bytes, then EOF; on
// -echo-port every connection gets back what it sends. It serves either on
// a tsnet node's tailnet address (-control; the "direct tailnet TCP"
// baseline) or on a host address (-host; what a subnet router or exit node
// forwards to), so both ends of the comparison are the same code in a
// process of their own.
//
// It is a benchmark helper, not a product; it imports tsnet and the
// standard library.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"tailscale.com/tsnet"
)

func main() {
	control := flag.String("control", "", "control server URL (serve on the tailnet)")
	hostname := flag.String("hostname", "tcp-node", "tailnet hostname")
	dir := flag.String("dir", "", "tsnet state folder")
	host := flag.String("host", "", "host address to serve on instead of the tailnet")
	sourcePort := flag.Int("source-port", 9000, "port that sends -size bytes to every connection")
	echoPort := flag.Int("echo-port", 9001, "port that echoes")
	size := flag.Int64("size", 100<<20, "bytes sent per source connection")
	flag.Parse()
	if err := run(*control, *hostname, *dir, *host, *sourcePort, *echoPort, *size); err != nil {
		fmt.Fprintln(os.Stderr, "tcpnode:", err)
		os.Exit(1)
	}
}

func run(control, hostname, dir, host string, sourcePort, echoPort int, size int64) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	listen := func(port int) (net.Listener, error) {
		return net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	}
	if control != "" {
		s := &tsnet.Server{Dir: dir, Hostname: hostname, ControlURL: control, Logf: func(string, ...any) {}}
		defer s.Close()
		upCtx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		if _, err := s.Up(upCtx); err != nil {
			return err
		}
		listen = func(port int) (net.Listener, error) { return s.Listen("tcp", ":"+strconv.Itoa(port)) }
	}
	src, err := listen(sourcePort)
	if err != nil {
		return err
	}
	echo, err := listen(echoPort)
	if err != nil {
		return err
	}
	go serve(src, func(c net.Conn) { _, _ = io.CopyN(c, zeros{}, size) })
	go serve(echo, func(c net.Conn) { _, _ = io.Copy(c, c) })
	fmt.Println("ready")
	<-ctx.Done()
	src.Close()
	echo.Close()
	return nil
}

func serve(ln net.Listener, handle func(net.Conn)) {
	for {
		c, err := ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				fmt.Fprintln(os.Stderr, "tcpnode: accept:", err)
			}
			return
		}
		go func() { defer c.Close(); handle(c) }()
	}
}

// zeros is an endless source of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
