package echobasic

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"

	"github.com/charmbracelet/log"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/reflection"
	pb "sigs.k8s.io/gateway-api/conformance/echo-basic/grpcechoserver"
)

// grpcEcho is the GrpcEcho service: Echo and EchoTwo answer with the
// request's method, metadata, authority, the pod context and (over TLS) the
// connection's facts; EchoThree stays unimplemented, as the suite expects.
type grpcEcho struct {
	pb.UnimplementedGrpcEchoServer
	service string
	tls     bool
	ctx     *pb.Context
	logger  *log.Logger
}

// Echo answers with the request's assertions.
func (s *grpcEcho) Echo(ctx context.Context, _ *pb.EchoRequest) (*pb.EchoResponse, error) {
	return s.echo(ctx, "Echo")
}

// EchoTwo is Echo at another method.
func (s *grpcEcho) EchoTwo(ctx context.Context, _ *pb.EchoRequest) (*pb.EchoResponse, error) {
	return s.echo(ctx, "EchoTwo")
}

func (s *grpcEcho) echo(ctx context.Context, method string) (*pb.EchoResponse, error) {
	md, ok := metadata.FromIncomingContext(ctx)
	if !ok {
		return nil, errors.New("no metadata in the incoming request")
	}
	a := &pb.Assertions{FullyQualifiedMethod: fmt.Sprintf("/%s/%s", s.service, method), Context: s.ctx}
	for k, vs := range md {
		for _, v := range vs {
			if k == ":authority" {
				a.Authority = v
			}
			a.Headers = append(a.Headers, &pb.Header{Key: k, Value: v})
		}
	}
	if s.tls {
		p, ok := peer.FromContext(ctx)
		if !ok {
			return nil, errors.New("no peer in the incoming request")
		}
		info, ok := p.AuthInfo.(credentials.TLSInfo)
		if !ok {
			return nil, errors.New("no TLS facts in the incoming request")
		}
		st := info.State
		a.TlsAssertions = &pb.TLSAssertions{
			Version: tlsVersionName(st.Version), NegotiatedProtocol: st.NegotiatedProtocol,
			ServerName: st.ServerName, CipherSuite: tls.CipherSuiteName(st.CipherSuite),
			PeerCertificates: peerPEMs(st.PeerCertificates),
		}
	}
	s.logger.Debug("grpc echo", "method", a.FullyQualifiedMethod, "authority", a.Authority, "tls", s.tls)
	return &pb.EchoResponse{Assertions: a}, nil
}

func startGRPC(ctx context.Context, c Config, s *Servers, logger *log.Logger) error {
	svc := pb.File_grpcecho_proto.Services().ByName("GrpcEcho")
	if svc == nil {
		return errors.New("service GrpcEcho is not in grpcecho.proto")
	}
	pc := &pb.Context{Namespace: c.Context.Namespace, Ingress: c.Context.Ingress, ServiceName: c.Context.Service, Pod: c.Context.Pod}
	l, err := s.listen(ctx, "grpc", c.Host, c.HTTPPort)
	if err != nil {
		return err
	}
	plain := grpc.NewServer()
	pb.RegisterGrpcEchoServer(plain, &grpcEcho{service: string(svc.FullName()), ctx: pc, logger: logger})
	reflection.Register(plain)
	s.stops = append(s.stops, plain.Stop)
	s.serve("grpc", func() error { return plain.Serve(l) })
	if !c.tls() {
		return nil
	}
	cfg, err := serverTLS(c.CertFile, c.KeyFile, "")
	if err != nil {
		return err
	}
	tl, err := s.listen(ctx, "grpc-tls", c.Host, c.HTTPSPort)
	if err != nil {
		return err
	}
	secure := grpc.NewServer(grpc.Creds(credentials.NewTLS(cfg)))
	pb.RegisterGrpcEchoServer(secure, &grpcEcho{service: string(svc.FullName()), tls: true, ctx: pc, logger: logger})
	reflection.Register(secure)
	s.stops = append(s.stops, secure.Stop)
	s.serve("grpc-tls", func() error { return secure.Serve(tl) })
	return nil
}
