package svcproxy

import (
	"context"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/charmbracelet/log"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// backend serves "hello from NAME" on TCP and echoes UDP on one address.
func backend(t *testing.T, name string) (ip string, port int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, "hello from "+name)
			c.Close()
		}
	}()
	port = ln.Addr().(*net.TCPAddr).Port
	pc, err := net.ListenPacket("udp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 100)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo(append([]byte(name+":"), buf[:n]...), from)
		}
	}()
	return "127.0.0.1", port
}

func eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	gomega.NewWithT(t).Eventually(f).WithTimeout(10*time.Second).WithPolling(50*time.Millisecond).Should(gomega.Succeed(), what)
}

func readTCP(addr string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	b, err := io.ReadAll(c)
	return string(b), err
}

func TestForwardsToReadyEndpointsAndFollowsSlices(t *testing.T) {
	ip, port := backend(t, "a")
	client := fake.NewClientset()
	ctx, cancel := context.WithCancel(context.Background())
	p := New(client, log.New(io.Discard))
	ready := make(chan struct{})
	done := make(chan struct{})
	go func() { p.Run(ctx, ready); close(done) }()
	defer func() { cancel(); <-done }()
	<-ready

	clusterIP := "127.96.251.7"
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"}, Spec: corev1.ServiceSpec{
		ClusterIP: clusterIP,
		Ports: []corev1.ServicePort{
			{Name: "http", Port: 18080, Protocol: corev1.ProtocolTCP},
			{Name: "dns", Port: 18080, Protocol: corev1.ProtocolUDP},
		},
	}}
	if _, err := client.CoreV1().Services("ns").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	yes, no := true, false
	tcp, udp := corev1.ProtocolTCP, corev1.ProtocolUDP
	http, dns := "http", "dns"
	p32 := int32(port)
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "web-1", Namespace: "ns", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: &yes}}},
		Ports:       []discoveryv1.EndpointPort{{Name: &http, Port: &p32, Protocol: &tcp}, {Name: &dns, Port: &p32, Protocol: &udp}},
	}
	if _, err := client.DiscoveryV1().EndpointSlices("ns").Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	front := net.JoinHostPort(clusterIP, "18080")
	eventually(t, "TCP through the ClusterIP", func() error {
		got, err := readTCP(front)
		if err == nil && got != "hello from a" {
			return io.ErrUnexpectedEOF
		}
		return err
	})
	eventually(t, "UDP through the ClusterIP", func() error {
		c, err := net.Dial("udp", front)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(time.Second))
		if _, err := c.Write([]byte("q")); err != nil {
			return err
		}
		buf := make([]byte, 10)
		n, err := c.Read(buf)
		if err == nil && string(buf[:n]) != "a:q" {
			return io.ErrUnexpectedEOF
		}
		return err
	})

	// An endpoint that is not ready gets no traffic.
	slice.Endpoints[0].Conditions.Ready = &no
	if _, err := client.DiscoveryV1().EndpointSlices("ns").Update(ctx, slice, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "no traffic to unready endpoints", func() error {
		if got, _ := readTCP(front); got != "" {
			return io.ErrUnexpectedEOF
		}
		return nil
	})

	// A deleted Service releases its address.
	if err := client.CoreV1().Services("ns").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "listener closed after the Service is deleted", func() error {
		if len(p.Addresses()) != 0 {
			return io.ErrUnexpectedEOF
		}
		if _, err := net.DialTimeout("tcp", front, time.Second); err == nil {
			return io.ErrUnexpectedEOF
		}
		return nil
	})
}
