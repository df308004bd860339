package official

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/charmbracelet/log"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func getOpts() metav1.GetOptions { return metav1.GetOptions{} }

// exposeAlone compares the seed's annotated Service (tailscale.com/expose),
// which both operators would serve at once (there is no class to tell them
// apart): each operator gets it with the other one scaled to zero.
func (e *Env) exposeAlone(ctx context.Context, domain string, logger *log.Logger) ([]CompatRow, []string, error) {
	const name = "Service with tailscale.com/expose"
	sides := Sides()
	var snaps [2]Snapshot
	var notes []string
	for i, s := range sides {
		other := sides[1-i]
		if err := e.Cluster.ScaleOperator(ctx, other.Namespace, 0); err != nil {
			return nil, nil, err
		}
		obj, err := e.seedObject("examples/seed/01-service-expose.yaml", nil)
		if err != nil {
			return nil, nil, err
		}
		url := "http://default-postgres." + domain + ":5432/"
		if d, err := e.Cluster.FirstSuccess(ctx, obj, HTTPProbe(e.Probe, url, http.StatusOK), 90*time.Second); err != nil {
			notes = append(notes, fmt.Sprintf("%s, %s: the proxy never served (%v); proxy pods: %s", name, s.Name, err, e.podSummary(ctx, s.Namespace)))
		} else {
			logger.Info("exposed", "case", name, "operator", s.Name, "apply to first success", d.Round(time.Millisecond))
		}
		if snaps[i], err = e.settledSnapshot(ctx, obj, s, logger); err != nil {
			return nil, nil, err
		}
		if note, err := e.remove(ctx, s, obj, "default-postgres", time.Minute); err != nil {
			return nil, nil, fmt.Errorf("%s, %s: %w", name, s.Name, err)
		} else if note != "" {
			notes = append(notes, fmt.Sprintf("%s, %s: %s", name, s.Name, note))
		}
		if err := e.Cluster.ScaleOperator(ctx, other.Namespace, 1); err != nil {
			return nil, nil, err
		}
	}
	return Compare(name, snaps[0], snaps[1]), notes, nil
}

// manyServices exposes Cfg.Services LoadBalancer Services at once per
// operator, with the other operator scaled to zero (the official operator
// strips tailscale.com/finalizer from Services of another class, which
// would leave Tailplane's proxies behind on delete), reads the operator's
// RSS once every device is on the tailnet, then deletes them all and times
// until every device has left. A side that fails does not hide the other
// side's numbers, and an operator that leaves devices behind still has its
// RSS line; its clean-up line says how many left, when, and which stayed.
func (e *Env) manyServices(ctx context.Context, logger *log.Logger) []Line {
	n := e.Cfg.Services
	rss := Line{What: fmt.Sprintf("operator RSS at %d exposed LoadBalancer Services", n), Unit: "MiB", Samples: 1}
	cleanup := Line{What: fmt.Sprintf("clean-up of %d Services (delete until every device left)", n), Unit: "s", Samples: 1}
	if n == 0 {
		rss.Missing, cleanup.Missing = "not run (-services 0)", "not run (-services 0)"
		return []Line{rss, cleanup}
	}
	var results [2]manyResult
	sides := Sides()
	for i, s := range sides {
		results[i] = e.servicesAtOnce(ctx, logger, s, sides[1-i], n)
		r := results[i]
		logger.Info("Services at once", "operator", s.Name, "services", n, "operator RSS MiB", r.mib,
			"devices left", r.left, "last left after s", r.cleanup.Seconds(), "stayed", strings.Join(r.stayed, ","), "err", r.err)
	}
	var rssMissing, cleanupMissing []string
	for i, s := range sides {
		r := results[i]
		switch {
		case r.err != nil:
			msg := fmt.Sprintf("%s: %v", s.Name, r.err)
			rssMissing, cleanupMissing = append(rssMissing, msg), append(cleanupMissing, msg)
		case len(r.stayed) > 0:
			cleanupMissing = append(cleanupMissing, fmt.Sprintf("%s: %d of %d devices left, the last after %s; %d still on the tailnet %s after the delete (%s)",
				s.Name, r.left, n, formatNumber(r.cleanup.Seconds())+" s", len(r.stayed), cleanupWait, strings.Join(r.stayed, ", ")))
		default:
			cleanupMissing = append(cleanupMissing, fmt.Sprintf("%s: all %d devices left after %s s", s.Name, n, formatNumber(r.cleanup.Seconds())))
		}
		if r.err == nil {
			rssMissing = append(rssMissing, fmt.Sprintf("%s: %s MiB", s.Name, formatNumber(r.mib)))
		}
	}
	if results[0].err == nil && results[1].err == nil {
		rss.Official, rss.Tailplane = results[0].mib, results[1].mib
	} else {
		rss.Missing = strings.Join(rssMissing, "; ")
	}
	if results[0].err == nil && results[1].err == nil && len(results[0].stayed) == 0 && len(results[1].stayed) == 0 {
		cleanup.Official, cleanup.Tailplane = results[0].cleanup.Seconds(), results[1].cleanup.Seconds()
	} else {
		cleanup.Missing = strings.Join(cleanupMissing, "; ")
	}
	return []Line{rss, cleanup}
}

// manyResult is one side's outcome of servicesAtOnce.
type manyResult struct {
	// mib is the operator's RSS with every device on the tailnet.
	mib float64
	// left devices left the tailnet after the delete, the last of them
	// cleanup after it; stayed are the hosts whose devices did not.
	left    int
	cleanup time.Duration
	stayed  []string
	// err: the side could not be measured (its devices never all came up,
	// say).
	err error
}

// servicesAtOnce is one side of manyServices: other scaled to zero, n
// LoadBalancer Services of s's class applied, the operator's RSS read once
// all their devices are on the tailnet, then the Services deleted and the
// devices' leaving timed. The Services and any device left are removed,
// and other scaled back up, whatever happens.
func (e *Env) servicesAtOnce(ctx context.Context, logger *log.Logger, s, other Side, n int) (r manyResult) {
	var objs []*unstructured.Unstructured
	var hosts []string
	for k := range n {
		name := fmt.Sprintf("bench-%03d", k)
		objs = append(objs, loadBalancer(name, s.LoadBalancerClass))
		hosts = append(hosts, "default-"+name)
	}
	// Both sides name their devices alike: a device the other side left
	// would count as this side's, present at once and never gone.
	if r.err = e.removeDevices(ctx, logger, hosts, "left before "+s.Name+"'s Services"); r.err != nil {
		return r
	}
	if r.err = e.Cluster.ScaleOperator(ctx, other.Namespace, 0); r.err != nil {
		return r
	}
	defer func() {
		for _, o := range objs {
			_ = e.Cluster.Delete(ctx, o, time.Minute)
		}
		_ = e.removeDevices(ctx, logger, hosts, "left by "+s.Name)
		_ = e.Cluster.ScaleOperator(ctx, other.Namespace, 1)
	}()
	for _, o := range objs {
		if _, r.err = e.Cluster.Apply(ctx, o); r.err != nil {
			return r
		}
	}
	// Session 12: the official operator's 100 L3 proxies took about 15
	// minutes to come up on 2 cores.
	if r.err = DevicesPresent(ctx, e.Tailnet, hosts, 25*time.Minute); r.err != nil {
		r.err = fmt.Errorf("%w (pods: %s)", r.err, e.podSummary(ctx, s.Namespace))
		return r
	}
	if r.mib, r.err = e.operatorRSS(ctx, s); r.err != nil {
		return r
	}
	start := time.Now()
	for _, o := range objs {
		if r.err = e.Cluster.Delete(ctx, o, 0); r.err != nil {
			return r
		}
	}
	r.cleanup, r.stayed, r.err = DevicesLeaving(ctx, e.Tailnet, hosts, start, cleanupWait)
	r.left = len(hosts) - len(r.stayed)
	return r
}

// cleanupWait bounds the wait for deleted Services' devices to leave: a
// device its operator did not delete stays for good.
const cleanupWait = 5 * time.Minute

// removeDevices deletes the tailnet's devices of hosts through the API,
// logging them with why they were there.
func (e *Env) removeDevices(ctx context.Context, logger *log.Logger, hosts []string, why string) error {
	removed, err := e.deleteDevicesOf(ctx, hosts)
	if len(removed) > 0 {
		logger.Warn("removed devices", "why", why, "devices", strings.Join(removed, ","))
	}
	return err
}

// deleteDevicesOf deletes the tailnet's devices of hosts through the API
// and returns their names.
func (e *Env) deleteDevicesOf(ctx context.Context, hosts []string) ([]string, error) {
	devices, err := e.Tailnet.Devices(ctx)
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, d := range devices {
		for _, h := range hosts {
			if d.Hostname == h || strings.HasPrefix(d.Name, h+".") {
				if err := e.Tailnet.DeleteDevice(ctx, d.ID); err != nil {
					return removed, err
				}
				removed = append(removed, d.Name)
				break
			}
		}
	}
	return removed, nil
}

// loadBalancer is a LoadBalancer Service of class in default, in front of
// the postgres echo backend.
func loadBalancer(name, class string) *unstructured.Unstructured {
	svc := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeLoadBalancer, LoadBalancerClass: &class,
			Selector: map[string]string{"app": "postgres"},
			Ports:    []corev1.ServicePort{{Port: 5432, TargetPort: intstr.FromInt32(5432)}},
		},
	}
	return toUnstructured(svc)
}

func toUnstructured(o any) *unstructured.Unstructured {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		panic(fmt.Sprintf("convert %T: %v", o, err)) // a typed object always converts
	}
	return &unstructured.Unstructured{Object: m}
}
