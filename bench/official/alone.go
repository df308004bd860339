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
// side's numbers: they go into the line's reason.
func (e *Env) manyServices(ctx context.Context, logger *log.Logger) []Line {
	n := e.Cfg.Services
	rss := Line{What: fmt.Sprintf("operator RSS at %d exposed LoadBalancer Services", n), Unit: "MiB", Samples: 1}
	cleanup := Line{What: fmt.Sprintf("clean-up of %d Services (delete until every device left)", n), Unit: "s", Samples: 1}
	if n == 0 {
		rss.Missing, cleanup.Missing = "not run (-services 0)", "not run (-services 0)"
		return []Line{rss, cleanup}
	}
	var mib, secs [2]float64
	var failed []string
	sides := Sides()
	for i, s := range sides {
		if err := e.servicesAtOnce(ctx, logger, s, sides[1-i], n, &mib[i], &secs[i]); err != nil {
			msg := fmt.Sprintf("%s: %v (pods: %s)", s.Name, err, e.podSummary(ctx, s.Namespace))
			logger.Warn("Services at once", "err", msg)
			failed = append(failed, msg)
			continue
		}
		logger.Info("Services at once", "operator", s.Name, "services", n, "operator RSS MiB", mib[i], "clean-up s", secs[i])
		failed = append(failed, "")
	}
	if failed[0] != "" || failed[1] != "" {
		for i, s := range sides {
			if failed[i] == "" {
				failed[i] = fmt.Sprintf("%s: operator RSS %s MiB, clean-up %s s", s.Name, formatNumber(mib[i]), formatNumber(secs[i]))
			}
		}
		rss.Missing = strings.Join(failed, "; ")
		cleanup.Missing = rss.Missing
		return []Line{rss, cleanup}
	}
	rss.Official, rss.Tailplane = mib[0], mib[1]
	cleanup.Official, cleanup.Tailplane = secs[0], secs[1]
	return []Line{rss, cleanup}
}

// servicesAtOnce is one side of manyServices: other scaled to zero, n
// LoadBalancer Services of s's class applied, the operator's RSS read once
// all their devices are on the tailnet, then the Services deleted and the
// time until every device left. The Services are removed and other scaled
// back up whatever happens.
func (e *Env) servicesAtOnce(ctx context.Context, logger *log.Logger, s, other Side, n int, mib, secs *float64) error {
	var objs []*unstructured.Unstructured
	var hosts []string
	for k := range n {
		name := fmt.Sprintf("bench-%03d", k)
		objs = append(objs, loadBalancer(name, s.LoadBalancerClass))
		hosts = append(hosts, "default-"+name)
	}
	// Both sides name their devices alike: a device the other side left
	// would count as this side's, present at once and never gone.
	if err := e.removeDevices(ctx, logger, hosts, "left before "+s.Name+"'s Services"); err != nil {
		return err
	}
	if err := e.Cluster.ScaleOperator(ctx, other.Namespace, 0); err != nil {
		return err
	}
	defer func() {
		for _, o := range objs {
			_ = e.Cluster.Delete(ctx, o, time.Minute)
		}
		_ = e.removeDevices(ctx, logger, hosts, "left by "+s.Name)
		_ = e.Cluster.ScaleOperator(ctx, other.Namespace, 1)
	}()
	for _, o := range objs {
		if _, err := e.Cluster.Apply(ctx, o); err != nil {
			return err
		}
	}
	// Session 12: the official operator's 100 L3 proxies took about 15
	// minutes to come up on 2 cores.
	if err := DevicesPresent(ctx, e.Tailnet, hosts, 25*time.Minute); err != nil {
		return err
	}
	m, err := e.operatorRSS(ctx, s)
	if err != nil {
		return err
	}
	*mib = m
	start := time.Now()
	for _, o := range objs {
		if err := e.Cluster.Delete(ctx, o, 0); err != nil {
			return err
		}
	}
	d, err := DevicesGone(ctx, e.Tailnet, hosts, start, cleanupWait)
	*secs = d.Seconds()
	return err
}

// cleanupWait bounds the wait for deleted Services' devices to leave: a
// device its operator did not delete stays for good.
const cleanupWait = 5 * time.Minute

// removeDevices deletes the tailnet's devices of hosts through the API,
// logging them with why they were there.
func (e *Env) removeDevices(ctx context.Context, logger *log.Logger, hosts []string, why string) error {
	devices, err := e.Tailnet.Devices(ctx)
	if err != nil {
		return err
	}
	want := map[string]bool{}
	for _, h := range hosts {
		want[h] = true
	}
	var removed []string
	for _, d := range devices {
		if want[strings.SplitN(d.Name, ".", 2)[0]] || want[d.Hostname] {
			if err := e.Tailnet.DeleteDevice(ctx, d.ID); err != nil {
				return err
			}
			removed = append(removed, d.Name)
		}
	}
	if len(removed) > 0 {
		logger.Warn("removed devices", "why", why, "devices", strings.Join(removed, ","))
	}
	return nil
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
