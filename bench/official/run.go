package official

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"time"

	"github.com/charmbracelet/log"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Report is what a run measured.
type Report struct {
	Compat []CompatRow
	// Notes say what did not work in the run, per case and side.
	Notes []string
	Lines []Line
}

// exposure is one of the seed's manifests, timed and compared.
type exposure struct {
	name, file string
	// annotations are added to the seed's object (the http-redirect).
	annotations map[string]string
	host        string
	url         func(domain string) string
	// load says whether the L7 load and the proxy's RSS are measured.
	load bool
}

func exposures() []exposure {
	return []exposure{
		{name: "Ingress (http-redirect)", file: "examples/seed/03-ingress.yaml", annotations: map[string]string{"tailscale.com/http-redirect": "true"},
			host: "my-app", url: func(d string) string { return "https://my-app." + d + "/" }, load: true},
		{name: "LoadBalancer Service", file: "examples/seed/02-service-loadbalancer.yaml",
			host: "default-postgres-lb", url: func(d string) string { return "http://default-postgres-lb." + d + ":5432/" }},
	}
}

// seedObject reads the one object of a seed file into namespace default.
func (e *Env) seedObject(file string, annotations map[string]string) (*unstructured.Unstructured, error) {
	objs, err := ReadManifests(filepath.Join(e.Cfg.Root, file))
	if err != nil {
		return nil, err
	}
	if len(objs) != 1 {
		return nil, fmt.Errorf("%s: want one object, found %d", file, len(objs))
	}
	o := objs[0]
	o.SetNamespace("default")
	if len(annotations) > 0 {
		a := o.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		for k, v := range annotations {
			a[k] = v
		}
		o.SetAnnotations(a)
	}
	return o, nil
}

// Run measures both operators: the seed's echo backends first, then each
// operator's idle RSS, each exposure Runs times per operator (alternating),
// the compatibility snapshots, the L7 load, the exposed-annotation Service
// and the ProxyGroup with its members (each operator alone) and Services at
// once.
func Run(ctx context.Context, e *Env, logger *log.Logger) (Report, error) {
	var r Report
	if err := e.backends(ctx); err != nil {
		return r, err
	}
	sides := Sides()
	var idle [2]float64
	for i, s := range sides {
		mib, err := e.operatorRSS(ctx, s)
		if err != nil {
			return r, err
		}
		idle[i] = mib
	}
	domain := e.Tailnet["TS_MAGICDNS_DOMAIN"]
	for _, x := range exposures() {
		if !e.Cfg.Does(CaseDedicated) {
			break
		}
		lines, rows, notes, err := e.timeExposure(ctx, x, domain, logger)
		if err != nil {
			return r, err
		}
		r.Lines, r.Compat, r.Notes = append(r.Lines, lines...), append(r.Compat, rows...), append(r.Notes, notes...)
	}
	alone := []struct {
		name string
		run  func(context.Context, string, *log.Logger) ([]CompatRow, []string, error)
	}{{CaseExpose, e.exposeAlone}, {CaseProxyGroup, e.proxyGroupAlone}}
	for _, c := range alone {
		if !e.Cfg.Does(c.name) {
			continue
		}
		rows, notes, err := c.run(ctx, domain, logger)
		if err != nil {
			return r, err
		}
		r.Compat, r.Notes = append(r.Compat, rows...), append(r.Notes, notes...)
	}
	r.Lines = append(r.Lines, Line{What: "operator RSS, idle (after install)", Unit: "MiB", Official: idle[0], Tailplane: idle[1], Samples: 1})
	if e.Cfg.Does(CaseServices) {
		r.Lines = append(r.Lines, e.manyServices(ctx, logger)...)
	}
	return r, nil
}

// backends applies the echo Deployments and Service the seed's manifests
// point at and waits until they are available.
func (e *Env) backends(ctx context.Context) error {
	objs, err := ReadManifests(filepath.Join(e.Cfg.Root, "kind-e2e", "operator", "testdata", "echo.yaml"))
	if err != nil {
		return err
	}
	for _, o := range objs {
		o.SetNamespace("default")
		if _, err := e.Cluster.Apply(ctx, o); err != nil {
			return err
		}
	}
	for _, name := range []string{"my-app", "postgres"} {
		err := Poll(ctx, 3*time.Minute, 500*time.Millisecond, func() (bool, error) {
			d, err := e.Cluster.Kube.AppsV1().Deployments("default").Get(ctx, name, getOpts())
			return err == nil && d.Status.AvailableReplicas >= 1, err
		}, "backend "+name+" available")
		if err != nil {
			return fmt.Errorf("%w (pods: %s)", err, e.podSummary(ctx, "default"))
		}
	}
	return nil
}

// operatorRSS is the RSS of side's operator pod in MiB.
func (e *Env) operatorRSS(ctx context.Context, s Side) (float64, error) {
	uids, err := e.Cluster.OperatorPods(ctx, s.Namespace)
	if err != nil || len(uids) != 1 {
		return 0, fmt.Errorf("%s operator pods %v: %v", s.Name, uids, err)
	}
	b, _, err := PodRSS("/proc", uids[0])
	if err != nil {
		return 0, fmt.Errorf("%s operator: %w", s.Name, err)
	}
	return float64(b) / (1 << 20), nil
}

// timeExposure applies x to each side Runs times (alternating sides, each
// run ending when the device left the tailnet), and compares the first
// run's snapshots. A side whose proxy never serves is noted and not timed
// again.
func (e *Env) timeExposure(ctx context.Context, x exposure, domain string, logger *log.Logger) ([]Line, []CompatRow, []string, error) {
	sides := Sides()
	var took [2][]time.Duration
	var snaps [2]Snapshot
	var failed [2]string
	var loads [2][]LoadResult
	var proxyRSS [2]float64
	var notes []string
	for run := range e.Cfg.Runs {
		for i, s := range sides {
			if failed[i] != "" {
				continue
			}
			obj, err := e.seedObject(x.file, x.annotations)
			if err != nil {
				return nil, nil, nil, err
			}
			obj = ForSide(obj, s)
			d, err := e.Cluster.FirstSuccess(ctx, obj, HTTPProbe(e.Probe, x.url(domain), http.StatusOK), 90*time.Second)
			if err != nil {
				failed[i] = err.Error()
				notes = append(notes, fmt.Sprintf("%s, %s: the proxy never served (%v); proxy pods: %s", x.name, s.Name, err, e.podSummary(ctx, s.Namespace)))
			} else {
				took[i] = append(took[i], d)
				logger.Info("exposed", "case", x.name, "operator", s.Name, "run", run+1, "apply to first success", d.Round(time.Millisecond))
			}
			if run == 0 {
				if snaps[i], err = e.settledSnapshot(ctx, obj, s, logger); err != nil {
					return nil, nil, nil, err
				}
			}
			if x.load && run >= e.Cfg.Runs-loadRuns && failed[i] == "" {
				l := Load(ctx, e.Keep, &e.KeepDials, x.url(domain), e.Cfg.LoadWorkers, e.Cfg.LoadFor)
				loads[i] = append(loads[i], l)
				logger.Info("load", "case", x.name, "operator", s.Name, "run", run+1, "req/s", int(l.PerSecond), "p99", l.P99, "connections", l.Conns)
				proxyRSS[i] = e.proxyRSS(ctx, s, obj)
			}
			// The first run waits a minute for the device to leave; later
			// runs 20 s, so that an operator that leaves its proxy behind
			// costs the run less (the note still records each time).
			wait := 20 * time.Second
			if run == 0 {
				wait = time.Minute
			}
			if note, err := e.remove(ctx, s, obj, x.host, wait); err != nil {
				return nil, nil, nil, fmt.Errorf("%s, %s: %w", x.name, s.Name, err)
			} else if note != "" {
				notes = append(notes, fmt.Sprintf("%s, %s, run %d: %s", x.name, s.Name, run+1, note))
			}
		}
	}
	what := x.name + ": apply to first success through the tailnet"
	line := Line{What: what, Unit: "s", Samples: e.Cfg.Runs}
	if failed[0] != "" || failed[1] != "" {
		line.Missing = "a proxy never served (see the notes)"
	} else {
		line.Official, line.Tailplane = Median(Seconds(took[0])), Median(Seconds(took[1]))
	}
	lines := []Line{line}
	if x.load && failed[0] == "" && failed[1] == "" {
		n := e.Cfg.LoadWorkers
		var sum [2]LoadSummary
		for i := range sides {
			sum[i] = SummarizeLoads(loads[i])
		}
		lines = append(lines,
			Line{What: fmt.Sprintf("%s: requests/s, %d keep-alive clients, %s (connections opened: %s / %s)", x.name, n, e.Cfg.LoadFor, sum[0].Conns, sum[1].Conns),
				Unit: "req/s", Official: sum[0].PerSecond, Tailplane: sum[1].PerSecond, Samples: len(loads[1]), HigherIsBetter: true},
			Line{What: fmt.Sprintf("%s: p99 latency under that load (%d / %d requests)", x.name, sum[0].Requests, sum[1].Requests), Unit: "ms",
				Official: sum[0].P99ms, Tailplane: sum[1].P99ms, Samples: len(loads[1])},
			Line{What: x.name + ": proxy pod RSS after the load", Unit: "MiB", Official: proxyRSS[0], Tailplane: proxyRSS[1], Samples: 1})
		for i, s := range sides {
			if sum[i].Failures > 0 {
				notes = append(notes, fmt.Sprintf("%s, %s: %d requests failed under load", x.name, s.Name, sum[i].Failures))
			}
		}
	}
	return lines, Compare(x.name, snaps[0], snaps[1]), notes, nil
}

// proxyRSS is the RSS in MiB of the one proxy pod side made for obj; 0 when
// it cannot be read.
func (e *Env) proxyRSS(ctx context.Context, s Side, obj *unstructured.Unstructured) float64 {
	uids, err := e.Cluster.ProxyPods(ctx, s.Namespace, obj.GetNamespace(), obj.GetName())
	if err != nil || len(uids) == 0 {
		return 0
	}
	var total int64
	for _, uid := range uids {
		if b, _, err := PodRSS("/proc", uid); err == nil {
			total += b
		}
	}
	return float64(total) / (1 << 20)
}

// remove deletes obj and waits up to wait for its device to leave the tailnet. When
// the device stays (the operator did not clean up), it says so and removes
// what is left itself (the proxy's objects, the device), so that the next
// run can use the same name.
func (e *Env) remove(ctx context.Context, s Side, obj *unstructured.Unstructured, host string, wait time.Duration) (string, error) {
	start := time.Now()
	if err := e.Cluster.Delete(ctx, obj, 3*time.Minute); err != nil {
		return "", err
	}
	deleted := time.Since(start)
	_, gone := DevicesGone(ctx, e.Tailnet, []string{host}, start, wait)
	if gone == nil {
		return "", nil
	}
	note := fmt.Sprintf("after the %s was deleted (gone from the API after %s), its device was still on the tailnet %s later (proxy pods then: %s; %s; operator log: %s); the harness removed the proxy and the device itself",
		obj.GetKind(), deleted.Round(time.Second), wait, e.podSummary(ctx, s.Namespace), e.statefulSetSummary(ctx, s.Namespace), e.saveOperatorLog(ctx, s, obj))
	if err := e.Cluster.DeleteChildren(ctx, s.Namespace, obj.GetNamespace(), obj.GetName()); err != nil {
		return note, err
	}
	if _, err := e.deleteDevicesOf(ctx, []string{host}); err != nil {
		return note, err
	}
	_, err := DevicesGone(ctx, e.Tailnet, []string{host}, start, time.Minute)
	return note, err
}

// settledSnapshot is the compatibility snapshot of obj once side's operator
// stopped changing it (a snapshot that never settles within a minute is
// taken as it is, and says so in the log).
func (e *Env) settledSnapshot(ctx context.Context, obj *unstructured.Unstructured, s Side, logger *log.Logger) (Snapshot, error) {
	snap, took, err := e.Cluster.SettledSnapshot(ctx, e.Tailnet, obj, s.Namespace, time.Minute)
	if ctx.Err() != nil {
		return snap, ctx.Err()
	}
	logger.Info("status settled", "kind", obj.GetKind(), "name", obj.GetName(), "operator", s.Name, "took", took.Round(time.Second), "err", err)
	return snap, nil
}
