// Package svcproxy is devcluster's userspace service proxy: for every
// Service with a ClusterIP it binds ClusterIP:port (TCP and UDP, the service
// range being loopback addresses) and forwards to the ready endpoints of the
// Service's EndpointSlices, following them as they change.
//
// It may import client-go, the Kubernetes API types and charmbracelet/log.
package svcproxy

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/charmbracelet/log"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listerscorev1 "k8s.io/client-go/listers/core/v1"
	listersdiscoveryv1 "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
)

// frontend is one ClusterIP:port/protocol.
type frontend struct {
	addr  string // ip:port
	proto corev1.Protocol
}

// Proxy is a running service proxy. Each Service port gets a listener of
// its protocol (TCP or UDP; SCTP is skipped).
type Proxy struct {
	client kubernetes.Interface
	log    *log.Logger

	services listerscorev1.ServiceLister
	slices   listersdiscoveryv1.EndpointSliceLister

	mu        sync.Mutex
	listeners map[frontend]*listener
}

// New returns a proxy; call Run.
func New(client kubernetes.Interface, logger *log.Logger) *Proxy {
	return &Proxy{client: client, log: logger, listeners: map[frontend]*listener{}}
}

// Run follows Services and EndpointSlices until ctx ends, then closes every
// listener. ready is closed after the first sync.
func (p *Proxy) Run(ctx context.Context, ready chan<- struct{}) {
	factory := informers.NewSharedInformerFactory(p.client, 0)
	svcInf := factory.Core().V1().Services()
	sliceInf := factory.Discovery().V1().EndpointSlices()
	p.services, p.slices = svcInf.Lister(), sliceInf.Lister()
	kick := make(chan struct{}, 1)
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { trigger(kick) },
		UpdateFunc: func(any, any) { trigger(kick) },
		DeleteFunc: func(any) { trigger(kick) },
	}
	_, _ = svcInf.Informer().AddEventHandler(handler)
	_, _ = sliceInf.Informer().AddEventHandler(handler)
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	p.sync()
	if ready != nil {
		close(ready)
	}
	for {
		select {
		case <-ctx.Done():
			p.mu.Lock()
			for f, l := range p.listeners {
				l.close()
				delete(p.listeners, f)
			}
			p.mu.Unlock()
			return
		case <-kick:
			p.sync()
		}
	}
}

func trigger(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// sync makes the listeners match the Services and gives each its current
// ready endpoints.
func (p *Proxy) sync() {
	svcs, err := p.services.List(labels.Everything())
	if err != nil {
		return
	}
	want := map[frontend][]string{}
	for _, svc := range svcs {
		ip := svc.Spec.ClusterIP
		if ip == "" || ip == corev1.ClusterIPNone {
			continue
		}
		if svc.Namespace == "default" && svc.Name == "kubernetes" {
			continue // pods reach the apiserver directly (KUBERNETES_SERVICE_HOST)
		}
		for _, sp := range svc.Spec.Ports {
			proto := sp.Protocol
			if proto == "" {
				proto = corev1.ProtocolTCP
			}
			if proto == corev1.ProtocolSCTP {
				continue // no SCTP in userspace
			}
			f := frontend{addr: net.JoinHostPort(ip, strconv.Itoa(int(sp.Port))), proto: proto}
			want[f] = p.backends(svc, sp, proto)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for f, l := range p.listeners {
		if _, ok := want[f]; !ok {
			l.close()
			delete(p.listeners, f)
		}
	}
	for f, backends := range want {
		l, ok := p.listeners[f]
		if !ok {
			var err error
			l, err = listen(f, p.log)
			if err != nil {
				p.log.Warn("service proxy: cannot bind", "addr", f.addr, "proto", f.proto, "err", err)
				continue
			}
			p.listeners[f] = l
		}
		l.setBackends(backends)
	}
}

// backends are the ready endpoint addresses for one Service port.
func (p *Proxy) backends(svc *corev1.Service, sp corev1.ServicePort, proto corev1.Protocol) []string {
	sel := labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: svc.Name})
	slices, err := p.slices.EndpointSlices(svc.Namespace).List(sel)
	if err != nil {
		return nil
	}
	var out []string
	for _, s := range slices {
		port := int32(0)
		for _, ep := range s.Ports {
			epProto := corev1.ProtocolTCP
			if ep.Protocol != nil {
				epProto = *ep.Protocol
			}
			sameName := ep.Name == nil && sp.Name == "" || ep.Name != nil && *ep.Name == sp.Name
			if ep.Port != nil && sameName && epProto == proto {
				port = *ep.Port
			}
		}
		if port == 0 {
			continue
		}
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && !*e.Conditions.Ready {
				continue
			}
			for _, a := range e.Addresses {
				out = append(out, net.JoinHostPort(a, strconv.Itoa(int(port))))
			}
		}
	}
	return out
}

// Addresses lists the frontends currently bound, as "proto/ip:port".
func (p *Proxy) Addresses() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for f := range p.listeners {
		out = append(out, fmt.Sprintf("%s/%s", f.proto, f.addr))
	}
	return out
}

const udpIdle = 60 * time.Second
