package node

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// probeOnce runs one HTTP, TCP or exec probe (HTTP and TCP against the pod
// IP). gRPC probes are not supported on a process node and count as success.
func probeOnce(ctx context.Context, p *corev1.Probe, c *corev1.Container, podIP string, execProbe func(context.Context, []string) error) error {
	timeout := time.Duration(max(p.TimeoutSeconds, 1)) * time.Second
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	switch {
	case p.HTTPGet != nil:
		h := p.HTTPGet
		port, err := resolvePort(h.Port, c)
		if err != nil {
			return err
		}
		host := h.Host
		if host == "" {
			host = podIP
		}
		scheme := "http"
		if h.Scheme == corev1.URISchemeHTTPS {
			scheme = "https"
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s://%s%s", scheme, net.JoinHostPort(host, strconv.Itoa(port)), h.Path), nil)
		if err != nil {
			return err
		}
		for _, hd := range h.HTTPHeaders {
			req.Header.Set(hd.Name, hd.Value)
		}
		// Like the kubelet: no keep-alives, no certificate checks for HTTPS.
		client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, TLSClientConfig: insecureTLS()}}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode < 200 || resp.StatusCode >= 400 {
			return fmt.Errorf("HTTP probe failed with statuscode: %d", resp.StatusCode)
		}
		return nil
	case p.Exec != nil:
		return execProbe(ctx, p.Exec.Command)
	case p.TCPSocket != nil:
		port, err := resolvePort(p.TCPSocket.Port, c)
		if err != nil {
			return err
		}
		host := p.TCPSocket.Host
		if host == "" {
			host = podIP
		}
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			return err
		}
		return conn.Close()
	}
	return nil
}

func resolvePort(p intstr.IntOrString, c *corev1.Container) (int, error) {
	if p.Type == intstr.Int {
		return p.IntValue(), nil
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return int(cp.ContainerPort), nil
		}
	}
	return 0, fmt.Errorf("named port %q not found in container %s", p.StrVal, c.Name)
}

// prober tracks one probe's consecutive results.
type prober struct {
	probe                 *corev1.Probe
	successes, failures   int32
	result, everSucceeded bool
}

func newProber(p *corev1.Probe, initial bool) *prober { return &prober{probe: p, result: initial} }

func (pr *prober) period() time.Duration {
	return time.Duration(max(pr.probe.PeriodSeconds, 1)) * time.Second
}

// record folds one outcome in and reports whether the result changed.
func (pr *prober) record(err error) (changed bool) {
	success := threshold(pr.probe.SuccessThreshold)
	failure := threshold(pr.probe.FailureThreshold)
	old := pr.result
	if err == nil {
		pr.successes++
		pr.failures = 0
		if pr.successes >= success {
			pr.result = true
			pr.everSucceeded = true
		}
	} else {
		pr.failures++
		pr.successes = 0
		if pr.failures >= failure {
			pr.result = false
		}
	}
	return old != pr.result
}

func threshold(v int32) int32 {
	if v <= 0 {
		return 1
	}
	return v
}
