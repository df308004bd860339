package official

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/charmbracelet/log"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/tailplane/tailplane/deploy/chart"
)

// The migration (-migrate, issue 37): the official operator alone, installed
// as its users install it (namespace tailscale, release tailscale-operator,
// hostname tailscale-operator, classes tailscale), serves the seed's objects;
// then its release is uninstalled and Tailplane installed in its place
// (devinstall, every default: the same namespace, names and classes), while
// a client sends each object MigrateRate requests a second through the
// tailnet.
const (
	MigrateNamespace = "tailscale"
	// MigrateRate is the requests per second each object gets.
	MigrateRate = 20
	// migrateTimeout bounds one request: a request that takes longer
	// counts as failed.
	migrateTimeout = 3 * time.Second
)

// migrateTarget is one object of the migration, with what it needs.
type migrateTarget struct {
	name string
	// objects are applied in order (the last one is probed) and deleted in
	// the reverse order.
	objects func(e *Env) ([]*unstructured.Unstructured, error)
	// hosts are the devices that must stay the same.
	hosts []string
	url   func(domain string) string
	// routed: its clients reach it through a subnet route, with
	// Env.Routes instead of Env.Probe.
	routed bool
	// prepare, when set, runs beside the first probes (approving a route,
	// say).
	prepare func(ctx context.Context, e *Env) error
}

// probe is a probe of t's URL with the client that reaches it.
func (t migrateTarget) probe(e *Env, domain string) func(context.Context) error {
	client := e.Probe
	if t.routed {
		client = e.Routes
	}
	return HTTPProbe(client, t.url(domain), 200)
}

// seedTarget is a target of one seed object with one device.
func seedTarget(name, file, host string, url func(string) string) migrateTarget {
	return migrateTarget{name: name, hosts: []string{host}, url: url, objects: func(e *Env) ([]*unstructured.Unstructured, error) {
		o, err := e.seedObject(file, nil)
		return []*unstructured.Unstructured{o}, err
	}}
}

func migrateTargets() []migrateTarget {
	return []migrateTarget{
		seedTarget("exposed Service", "examples/seed/01-service-expose.yaml", "default-postgres",
			func(d string) string { return "http://default-postgres." + d + ":5432/" }),
		seedTarget("LoadBalancer Service", "examples/seed/02-service-loadbalancer.yaml", "default-postgres-lb",
			func(d string) string { return "http://default-postgres-lb." + d + ":5432/" }),
		seedTarget("Ingress", "examples/seed/03-ingress.yaml", "my-app",
			func(d string) string { return "https://my-app." + d + "/" }),
		{name: "ProxyGroup (ingress, 2 replicas): Ingress member", hosts: []string{"ingress-proxies-0", "ingress-proxies-1"},
			url: func(d string) string { return "https://" + pgIngressHost + "." + d + "/" },
			objects: func(e *Env) ([]*unstructured.Unstructured, error) {
				pg, err := e.seedObject(pgSeed, nil)
				if err != nil {
					return nil, err
				}
				pg.SetNamespace("")
				members, err := e.pgMembers(pg.GetName())
				if err != nil {
					return nil, err
				}
				return []*unstructured.Unstructured{pg, members[1]}, nil
			}},
		connectorTarget(),
	}
}

// UpMigrate starts devcluster's real node and installs the official operator
// alone, as MigrateNamespace's users have it: the official chart as it is
// released (its CRDs in the release, ReleaseChart) and its default
// ProxyClass. Stop undoes it.
func UpMigrate(ctx context.Context, cfg Config, logger *log.Logger) (*Env, error) {
	return up(ctx, cfg, logger, (*Env).installOfficialAlone)
}

func (e *Env) installOfficialAlone(ctx context.Context, logger *log.Logger) error {
	chartDir, err := ChartDir(ctx, filepath.Join(e.Cfg.Root, "bench", "official", "tools"))
	if err != nil {
		return err
	}
	if chartDir, err = e.releaseChart(chartDir); err != nil {
		return err
	}
	start := time.Now()
	helmLog := logger.WithPrefix("helm")
	helmLog.SetLevel(log.WarnLevel)
	if _, err := InstallChart(ctx, filepath.Join(e.dir, "kubeconfig"), chartDir, MigrateNamespace, OfficialRelease, e.officialValues(), 5*time.Minute, helmLog); err != nil {
		return fmt.Errorf("install the official chart: %w (its pods: %s)", err, e.podSummary(ctx, MigrateNamespace))
	}
	// The release's CRDs may not be served yet.
	err = Poll(ctx, time.Minute, 500*time.Millisecond, func() (bool, error) {
		_, err := e.Cluster.Apply(ctx, &unstructured.Unstructured{Object: ProxyClass(e.Tailnet)})
		return err == nil, err
	}, "ProxyClass "+OfficialProxyClass+" applied")
	if err != nil {
		return err
	}
	logger.Info("official operator installed alone", "namespace", MigrateNamespace, "took", time.Since(start).Round(time.Second))
	return nil
}

// officialValues are the official chart's values as its users have them:
// the operator's default hostname, the CRDs in the release.
func (e *Env) officialValues() map[string]any {
	values := OfficialValues(e.Tailnet)
	values["operatorConfig"].(map[string]any)["hostname"] = "tailscale-operator"
	values["installCRDs"] = true
	return values
}

// releaseChart assembles the official chart with its CRDs in the run's
// folder and remembers the CRDs' names.
func (e *Env) releaseChart(dir string) (string, error) {
	out := filepath.Join(e.Cfg.Work, "official-chart")
	names, err := ReleaseChart(dir, out)
	if err != nil {
		return "", err
	}
	e.officialCRDs = names
	return out, nil
}

// MigrateRow is what the migration measured of one object.
type MigrateRow struct {
	Object         string
	Before, After  []Device
	Requests, Fail int
	// Gap is the longest time without a successful request, from the
	// uninstall to the end of the load.
	Gap time.Duration
	// Extra are devices of the object's name made beside its own
	// ("<host>-1"): a device not taken over.
	Extra []string
}

// SameDevice reports whether the object kept its devices: node IDs and
// addresses, and no device of the same name made beside them.
func (r MigrateRow) SameDevice() bool {
	if len(r.Before) != len(r.After) || len(r.Extra) > 0 {
		return false
	}
	for i, b := range r.Before {
		a := r.After[i]
		if b.ID == "" || b.ID != a.ID || !slices.Equal(b.Addresses, a.Addresses) {
			return false
		}
	}
	return true
}

// MigrateReport is what -migrate measured.
type MigrateReport struct {
	Rows []MigrateRow
	// Uninstall and Install are how long the official release's uninstall
	// and Tailplane's install (until its operator was ready) took.
	Uninstall, Install time.Duration
	// BackRows are the way back (-back): the devices the official operator
	// first had, and after it took them back from Tailplane.
	BackRows []MigrateRow
	// HandBack is how long Tailplane's hand-back took (until its operator
	// in hand-back mode was ready), UninstallTailplane its release's
	// uninstall, Reinstall the official chart's install.
	HandBack, UninstallTailplane, Reinstall time.Duration
	Notes                                   []string
}

// RunMigrate serves the seed's objects with the official operator, starts the
// clients, replaces the operator, waits until Tailplane's proxies serve every
// object, keeps the load for 10 s more, then deletes the objects and checks
// that nothing is left.
//
// With back, the switch is followed, under the same load, by the way back
// (handBackToOfficial): BackRows measure it against the devices the
// official operator first had, and the official operator deletes the
// objects at the end.
func RunMigrate(ctx context.Context, e *Env, logger *log.Logger, back bool) (MigrateReport, error) {
	var r MigrateReport
	if err := e.backends(ctx); err != nil {
		return r, err
	}
	domain := e.Tailnet["TS_MAGICDNS_DOMAIN"]
	targets := migrateTargets()
	routes, leave, err := e.Tailnet.RoutesClient(ctx, e.routesDir(), "bench-routes")
	if err != nil {
		return r, err
	}
	defer leave()
	e.Routes = routes
	for _, t := range targets {
		objs, err := t.objects(e)
		if err != nil {
			return r, err
		}
		for _, o := range objs[:len(objs)-1] {
			if _, err := e.Cluster.Apply(ctx, o); err != nil {
				return r, err
			}
		}
		prepared := make(chan error, 1)
		if t.prepare != nil {
			go func() { prepared <- t.prepare(ctx, e) }()
		} else {
			prepared <- nil
		}
		d, err := e.Cluster.FirstSuccess(ctx, objs[len(objs)-1], t.probe(e, domain), 4*time.Minute)
		if perr := <-prepared; perr != nil {
			return r, perr
		}
		if err != nil {
			return r, fmt.Errorf("the official operator never served the %s: %w (pods: %s)", t.name, err, e.podSummary(ctx, MigrateNamespace))
		}
		logger.Info("served by the official operator", "object", t.name, "apply to first success", d.Round(time.Millisecond))
	}
	before, err := e.devicesByHost(ctx)
	if err != nil {
		return r, err
	}
	// Built before the load starts: a compile on both cores during the
	// switch starved the proxies being measured.
	if _, err := e.buildDevinstall(ctx); err != nil {
		return r, err
	}
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	clients := make([]*rateClient, len(targets))
	var wg sync.WaitGroup
	for i, t := range targets {
		clients[i] = &rateClient{probe: t.probe(e, domain)}
		wg.Add(1)
		go func() { defer wg.Done(); clients[i].run(loadCtx, MigrateRate) }()
	}
	warm := time.NewTimer(5 * time.Second) // a baseline before the switch
	select {
	case <-warm.C:
	case <-ctx.Done():
		return r, ctx.Err()
	}
	switchStart := time.Now()
	// The failures below are timed from here ("from +Ns").
	logger.Info("switching to Tailplane", "at", switchStart.Format("15:04:05.000"))
	if err := e.replaceOfficial(ctx, logger, &r); err != nil {
		return r, err
	}
	if err := e.waitServes(ctx, targets, domain, officialSelector, "Tailplane serving every object in the official operator's place"); err != nil {
		r.Notes = append(r.Notes, err.Error())
	}
	if !tail(ctx, 10*time.Second) { // the load goes on after the switch
		return r, ctx.Err()
	}
	backStart := time.Now()
	if back {
		logger.Info("handing back to the official operator", "at", backStart.Format("15:04:05.000"))
		r.Notes = append(r.Notes, e.switchLeftovers(ctx)...)
		if err := e.handBackToOfficial(ctx, logger, &r); err != nil {
			return r, err
		}
		if err := e.waitServes(ctx, targets, domain, tailplaneSelector, "the official operator serving every object again"); err != nil {
			r.Notes = append(r.Notes, err.Error())
		}
		tail(ctx, 10*time.Second)
	}
	stopLoad()
	wg.Wait()
	after, err := e.devicesByHost(ctx)
	if err != nil {
		return r, err
	}
	rows := func(w window) []MigrateRow {
		var out []MigrateRow
		for i, t := range targets {
			reqs, fails, gap := clients[i].stats(w)
			row := MigrateRow{Object: t.name, Requests: reqs, Fail: fails, Gap: gap}
			for _, h := range t.hosts {
				row.Before, row.After = append(row.Before, before[h]), append(row.After, after[h])
				for host, d := range after {
					if strings.HasPrefix(host, h+"-") && strings.TrimLeft(host[len(h)+1:], "0123456789") == "" && !slices.Contains(t.hosts, host) {
						row.Extra = append(row.Extra, d.Name)
					}
				}
			}
			out = append(out, row)
			for _, f := range clients[i].failures(w) {
				logger.Info("failed requests", "object", t.name, "reason", f)
			}
		}
		return out
	}
	if back {
		r.Rows = rows(window{gapFrom: switchStart, until: backStart})
		r.BackRows = rows(window{countFrom: backStart, gapFrom: backStart})
		r.Notes = append(r.Notes, e.deleteAndCheck(ctx, targets, logger)...)
		return r, nil
	}
	r.Rows = rows(window{gapFrom: switchStart})
	r.Notes = append(r.Notes, e.switchLeftovers(ctx)...)
	r.Notes = append(r.Notes, e.deleteAndCheck(ctx, targets, logger)...)
	return r, nil
}

// tail waits d, and reports whether ctx is still alive.
func tail(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// replaceOfficial uninstalls the official release and installs Tailplane in
// its place with devinstall and every default.
func (e *Env) replaceOfficial(ctx context.Context, logger *log.Logger, r *MigrateReport) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(e.dir, "kubeconfig"))
	if err != nil {
		return err
	}
	// docs/migration.md, "Switching, with Helm": the CRDs leave the
	// official release but stay (helm upgrade honours the live keep
	// annotation of what it removes; helm uninstall would not), the release
	// goes, Tailplane's takes the CRDs over (devinstall installs with
	// --take-ownership).
	keep := []byte(`{"metadata":{"annotations":{"helm.sh/resource-policy":"keep"}}}`)
	for _, name := range e.officialCRDs {
		if _, err := e.Cluster.Dyn.Resource(crdResource).Patch(ctx, name, types.MergePatchType, keep, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("keep CRD %s: %w", name, err)
		}
	}
	values := e.officialValues()
	values["installCRDs"] = false
	if _, err := InstallChart(ctx, filepath.Join(e.dir, "kubeconfig"), filepath.Join(e.Cfg.Work, "official-chart"), MigrateNamespace, OfficialRelease, values, 3*time.Minute, nil); err != nil {
		return fmt.Errorf("helm upgrade --set installCRDs=false: %w", err)
	}
	start := time.Now()
	if err := chart.Uninstall(ctx, cfg, OfficialRelease, MigrateNamespace, chart.Options{Timeout: 3 * time.Minute}); err != nil {
		return err
	}
	// Its operator's Pod goes before Tailplane's operator starts: both would
	// run the operator's device (the Secret operator) at once.
	err = Poll(ctx, 2*time.Minute, 250*time.Millisecond, func() (bool, error) {
		pods, err := e.Cluster.Kube.CoreV1().Pods(MigrateNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app=operator"})
		return err == nil && len(pods.Items) == 0, err
	}, "the official operator's Pod gone")
	if err != nil {
		return err
	}
	r.Uninstall = time.Since(start)
	logger.Info("official release uninstalled, its operator's Pod gone", "took", r.Uninstall.Round(time.Millisecond))
	if r.Install, err = e.installTailplane(ctx, map[string]any{"operatorConfig": map[string]any{"logging": "dev"}}); err != nil {
		return err
	}
	logger.Info("Tailplane installed in the official operator's place", "namespace", MigrateNamespace, "took", r.Install.Round(time.Millisecond))
	// The users' custom resources outlived the switch.
	if _, err := e.Cluster.Dyn.Resource(proxyClassResource).Get(ctx, OfficialProxyClass, metav1.GetOptions{}); err != nil {
		r.Notes = append(r.Notes, fmt.Sprintf("ProxyClass %s did not survive the switch: %v", OfficialProxyClass, err))
	}
	return nil
}

// waitServes waits until no proxy Pod of the operator replaced is left
// (gone, the selector of its proxies' Pods) and every object answers.
func (e *Env) waitServes(ctx context.Context, targets []migrateTarget, domain, gone, what string) error {
	return Poll(ctx, 5*time.Minute, 500*time.Millisecond, func() (bool, error) {
		pods, err := e.Cluster.Kube.CoreV1().Pods(MigrateNamespace).List(ctx, metav1.ListOptions{LabelSelector: gone})
		if err != nil || len(pods.Items) > 0 {
			return false, fmt.Errorf("proxy pods of the operator replaced left: %d (%v)", len(pods.Items), err)
		}
		for _, t := range targets {
			if err := t.probe(e, domain)(ctx); err != nil {
				return false, err
			}
		}
		return true, nil
	}, what)
}

var (
	crdResource        = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	proxyClassResource = schema.GroupVersionResource{Group: "tailscale.com", Version: "v1alpha1", Resource: "proxyclasses"}
)

// officialSelector selects the official operator's objects: its labels
// without Tailplane's role label.
const officialSelector = "tailscale.com/managed=true,!tailplane.dev/proxy-role"

// devicesByHost lists the tailnet's devices by the first label of their
// MagicDNS name.
func (e *Env) devicesByHost(ctx context.Context) (map[string]Device, error) {
	devs, err := e.Tailnet.Devices(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]Device{}
	for _, d := range devs {
		host, _, _ := strings.Cut(d.Name, ".")
		out[host] = d
	}
	return out, nil
}

// switchLeftovers says what the official operator left after the switch
// to Tailplane: objects of its own in the operator namespace.
func (e *Env) switchLeftovers(ctx context.Context) []string {
	var notes []string
	kube := e.Cluster.Kube
	if l, err := kube.CoreV1().Secrets(MigrateNamespace).List(ctx, metav1.ListOptions{LabelSelector: officialSelector + ",!tailplane.dev/member-kind"}); err != nil || len(l.Items) > 0 {
		var names []string
		if l != nil {
			for _, s := range l.Items {
				names = append(names, s.Name)
			}
		}
		notes = append(notes, fmt.Sprintf("official Secrets left after the switch: %v (%v)", names, err))
	}
	if l, err := kube.AppsV1().StatefulSets(MigrateNamespace).List(ctx, metav1.ListOptions{LabelSelector: officialSelector}); err != nil || len(l.Items) > 0 {
		notes = append(notes, fmt.Sprintf("official StatefulSets left after the switch: %d (%v)", len(l.Items), err))
	}
	if l, err := kube.CoreV1().Services(MigrateNamespace).List(ctx, metav1.ListOptions{LabelSelector: officialSelector}); err != nil || len(l.Items) > 0 {
		notes = append(notes, fmt.Sprintf("official Services left after the switch: %d (%v)", len(l.Items), err))
	}
	return notes
}

// deleteAndCheck deletes the objects and says what is left of them:
// devices, proxy Secrets.
func (e *Env) deleteAndCheck(ctx context.Context, targets []migrateTarget, logger *log.Logger) []string {
	var notes []string
	kube := e.Cluster.Kube
	var hosts []string
	start := time.Now()
	for _, t := range targets {
		hosts = append(hosts, t.hosts...)
		objs, err := t.objects(e)
		for i := len(objs) - 1; err == nil && i >= 0; i-- {
			err = e.Cluster.Delete(ctx, objs[i], 2*time.Minute)
		}
		if err != nil {
			notes = append(notes, fmt.Sprintf("%s: delete: %v", t.name, err))
		}
	}
	if d, err := DevicesGone(ctx, e.Tailnet, hosts, start, 3*time.Minute); err != nil {
		notes = append(notes, "devices after the delete: "+err.Error())
	} else {
		logger.Info("every device left the tailnet", "after", d.Round(time.Millisecond))
	}
	// No auth key an operator minted may stay usable: each was used once
	// by the device it was for, or revoked.
	if keys, err := e.Tailnet.AuthKeys(ctx); err != nil {
		notes = append(notes, err.Error())
	} else {
		var valid []string
		for _, k := range keys {
			if !k.Invalid {
				valid = append(valid, k.ID+" ("+k.Description+")")
			}
		}
		if len(valid) > 0 {
			notes = append(notes, fmt.Sprintf("auth keys still valid after the delete: %v", valid))
		}
	}
	if l, err := kube.CoreV1().Secrets(MigrateNamespace).List(ctx, metav1.ListOptions{LabelSelector: "tailscale.com/parent-resource"}); err != nil || len(l.Items) > 0 {
		var names []string
		if l != nil {
			for _, s := range l.Items {
				names = append(names, s.Name)
			}
		}
		notes = append(notes, fmt.Sprintf("proxy Secrets left after the delete: %v (%v)", names, err))
	}
	return notes
}

// rateClient sends requests at a fixed rate, each in its own goroutine (a
// request that hangs does not hold the next back), and keeps every
// result.
type rateClient struct {
	probe func(context.Context) error

	mu      sync.Mutex
	results []probeResult
}

type probeResult struct {
	at  time.Time
	ok  bool
	err string // why it failed
}

func (c *rateClient) run(ctx context.Context, perSecond int) {
	tick := time.NewTicker(time.Second / time.Duration(perSecond))
	defer tick.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		select {
		case <-ctx.Done():
			return
		case at := <-tick.C:
			wg.Add(1)
			go func() {
				defer wg.Done()
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), migrateTimeout)
				defer cancel()
				err := c.probe(rctx)
				r := probeResult{at: at, ok: err == nil}
				if err != nil {
					r.err = err.Error()
				}
				c.mu.Lock()
				c.results = append(c.results, r)
				c.mu.Unlock()
			}()
		}
	}
}

// failures are the distinct reasons of the requests in window w that
// failed, with how many failed for each, when the first did.
func (c *rateClient) failures(w window) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	count := map[string]int{}
	first := map[string]time.Time{}
	var order []string
	for _, r := range c.results {
		if r.at.Before(w.countFrom) || !w.until.IsZero() && !r.at.Before(w.until) {
			continue
		}
		if r.ok {
			continue
		}
		if _, seen := count[r.err]; !seen {
			order = append(order, r.err)
			first[r.err] = r.at
		}
		count[r.err]++
	}
	var out []string
	for _, e := range order {
		out = append(out, fmt.Sprintf("%d× from %+.2fs: %s", count[e], first[e].Sub(w.gapFrom).Seconds(), e))
	}
	return out
}

// stats are the requests sent, those that failed, and the longest gap
// between successful requests in window w.
func (c *rateClient) stats(w window) (requests, failed int, gap time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	results := slices.DeleteFunc(slices.Clone(c.results), func(r probeResult) bool {
		return r.at.Before(w.countFrom) || !w.until.IsZero() && !r.at.Before(w.until)
	})
	return gapStats(results, w.gapFrom)
}

// window is the part of a client's requests a row is measured on: those
// sent from countFrom (zero: the first) to until (zero: the last), gaps
// from gapFrom on.
type window struct{ countFrom, gapFrom, until time.Time }
