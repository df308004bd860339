package official

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/charmbracelet/log"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// The scale part (issue 38, part a): each operator alone makes the objects
// of ScaleServices LoadBalancer Services and ScaleIngresses Ingresses
// applied at once, whose proxies cannot start (ScaleProxyClass gives their
// pods a node selector no node has, so they stay Pending and cost the
// machine nothing). It measures what the operators themselves cost: the
// time until every parent's StatefulSet exists, the operator's peak RSS
// and CPU time, and its API requests per parent counted at the API server
// (audit log); then the deletion, until every parent and proxy object is
// gone, and what is left.
const (
	// ScaleProxyClass is the ProxyClass of the scale part's parents.
	ScaleProxyClass = "bench-scale-pending"
	// scaleLabel marks the scale part's parents.
	scaleLabel = "bench.tailplane.dev/scale"
)

// scaleProxyClass keeps proxy pods Pending: no node has its label.
func scaleProxyClass() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "tailscale.com/v1alpha1", "kind": "ProxyClass",
		"metadata": map[string]any{"name": ScaleProxyClass},
		"spec": map[string]any{"statefulSet": map[string]any{"pod": map[string]any{
			"nodeSelector": map[string]any{"bench.tailplane.dev/no-such-node": "true"},
		}}},
	}}
}

// ScaleResult is one side's outcome of the scale part.
type ScaleResult struct {
	Parents int
	// Applied is how long applying every parent took; Created how long
	// until every parent's StatefulSet existed, from the first apply.
	Applied, Created time.Duration
	// PeakRSS is the operator's highest RSS sampled (every 2 s) from the
	// first apply until the objects existed, in MiB; CPU its CPU seconds
	// over that time.
	PeakRSS, CPU float64
	// API is the operator's requests from the first apply until the
	// objects existed.
	API APICount
	// Deleted is how long from deleting every parent until they and every
	// object labelled with them were gone; Left names what was not, after
	// the wait.
	Deleted time.Duration
	Left    []string
	// Measured says which of the two phases finished: creation (Created,
	// PeakRSS, CPU, API) and deletion (Deleted with nothing left).
	CreateMeasured, DeleteMeasured bool
}

// scaleParents are the scale part's parents for side: Services
// scale-svc-NNNN and Ingresses scale-ing-NNNN in namespace default (the
// seed's Ingress, whose backend the run's echo Deployments serve).
func (e *Env) scaleParents(side Side) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	for k := range e.Cfg.ScaleServices {
		svc := loadBalancer(fmt.Sprintf("scale-svc-%04d", k), side.LoadBalancerClass)
		svc.SetLabels(map[string]string{scaleLabel: "true", "tailscale.com/proxy-class": ScaleProxyClass})
		objs = append(objs, svc)
	}
	for k := range e.Cfg.ScaleIngresses {
		ing, err := e.seedObject("examples/seed/03-ingress.yaml", nil)
		if err != nil {
			return nil, err
		}
		ing = ForSide(ing, side)
		ing.SetName(fmt.Sprintf("scale-ing-%04d", k))
		ing.SetLabels(map[string]string{scaleLabel: "true", "tailscale.com/proxy-class": ScaleProxyClass})
		// Each Ingress its own device name, as a user's would have.
		host := fmt.Sprintf("scale-ing-%04d", k)
		if err := unstructured.SetNestedSlice(ing.Object, []any{map[string]any{"hosts": []any{host}}}, "spec", "tls"); err != nil {
			return nil, err
		}
		objs = append(objs, ing)
	}
	return objs, nil
}

// Scale runs the scale part for both sides, the official operator first,
// each with the other scaled to zero.
func Scale(ctx context.Context, e *Env, logger *log.Logger) ([2]ScaleResult, [2]error) {
	var results [2]ScaleResult
	var errs [2]error
	if _, err := e.Cluster.Apply(ctx, scaleProxyClass()); err != nil {
		errs[0], errs[1] = err, err
		return results, errs
	}
	if err := e.backends(ctx); err != nil {
		errs[0], errs[1] = err, err
		return results, errs
	}
	sides := Sides()
	for i, s := range sides {
		results[i], errs[i] = e.scaleSide(ctx, logger, s, sides[1-i])
		r := results[i]
		logger.Info("scale", "operator", s.Name, "parents", r.Parents, "applied", r.Applied.Round(time.Millisecond),
			"created", r.Created.Round(time.Millisecond), "peak RSS MiB", int(r.PeakRSS), "CPU s", fmt.Sprintf("%.2f", r.CPU),
			"requests", r.API.Requests, "writes", r.API.Writes, "deleted", r.Deleted.Round(time.Millisecond), "left", len(r.Left), "err", errs[i])
	}
	return results, errs
}

// scaleSide is Scale for one side: other scaled to zero while s works, and
// scaled back whatever happens.
func (e *Env) scaleSide(ctx context.Context, logger *log.Logger, s, other Side) (ScaleResult, error) {
	var r ScaleResult
	parents, err := e.scaleParents(s)
	if err != nil {
		return r, err
	}
	r.Parents = len(parents)
	if err := e.Cluster.ScaleOperator(ctx, other.Namespace, 0); err != nil {
		return r, err
	}
	defer func() {
		if err := e.Cluster.ScaleOperator(ctx, other.Namespace, 1); err != nil {
			logger.Warn("scale the other operator back up", "operator", other.Name, "err", err)
		}
	}()
	uids, err := e.Cluster.OperatorPods(ctx, s.Namespace)
	if err != nil || len(uids) != 1 {
		return r, fmt.Errorf("%s operator pods %v: %v", s.Name, uids, err)
	}
	user, err := e.operatorUser(ctx, s.Namespace)
	if err != nil {
		return r, err
	}
	cpu0, err := PodCPU("/proc", uids[0])
	if err != nil {
		return r, err
	}
	sampler := startRSSSampler(uids[0], 2*time.Second)
	start := time.Now()
	if err := e.applyAll(ctx, parents, 16); err != nil {
		sampler.stop()
		return r, err
	}
	r.Applied = time.Since(start)
	logger.Info("scale: parents applied", "operator", s.Name, "parents", len(parents), "took", r.Applied.Round(time.Millisecond))
	names := map[string]bool{}
	for _, p := range parents {
		names[p.GetName()] = true
	}
	err = Poll(ctx, 45*time.Minute, 2*time.Second, func() (bool, error) {
		n, err := e.countChildren(ctx, s.Namespace, statefulSets, names)
		return n >= len(parents), err
	}, fmt.Sprintf("a StatefulSet for each of %d parents", len(parents)))
	end := time.Now()
	r.Created = end.Sub(start)
	r.PeakRSS = sampler.stop()
	if err != nil {
		return r, fmt.Errorf("%s: %w", s.Name, err)
	}
	cpu1, err := PodCPU("/proc", uids[0])
	if err != nil {
		return r, err
	}
	r.CPU = cpu1 - cpu0
	// The audit backend writes in batches: counted once a request the
	// harness makes as the operator's service account, after the window,
	// is in the log.
	auditLog := filepath.Join(e.dir, "logs", "audit.log")
	if err := e.auditMark(ctx, s.Namespace, user, auditLog); err != nil {
		return r, err
	}
	if r.API, err = CountAuditFile(auditLog, user, start, end); err != nil {
		return r, err
	}
	r.CreateMeasured = true
	logger.Info("scale: API requests per parent", "operator", s.Name, "calls", r.API.PerObject(len(parents)))

	delStart := time.Now()
	if err := e.deleteAll(ctx, parents, 16); err != nil {
		return r, err
	}
	err = Poll(ctx, 20*time.Minute, 2*time.Second, func() (bool, error) {
		left, err := e.scaleLeft(ctx, s.Namespace, names)
		return len(left) == 0, err
	}, fmt.Sprintf("%d parents and their proxies' objects to be gone", len(parents)))
	r.Deleted = time.Since(delStart)
	if err != nil {
		left, lerr := e.scaleLeft(ctx, s.Namespace, names)
		r.Left = left
		return r, errors.Join(fmt.Errorf("%s: %w", s.Name, err), lerr)
	}
	r.DeleteMeasured = true
	return r, nil
}

// auditMark makes one request as the operator's service account (a token
// from the TokenRequest API) and waits until the audit log holds it: every
// request received before it was written by then.
func (e *Env) auditMark(ctx context.Context, ns, user, auditLog string) error {
	sa := strings.TrimPrefix(user, "system:serviceaccount:"+ns+":")
	tr, err := e.Cluster.Kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("token for %s: %w", user, err)
	}
	cfg := rest.AnonymousClientConfig(e.Cluster.Config)
	cfg.BearerToken = tr.Status.Token
	as, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	mark := time.Now()
	if _, err := as.CoreV1().ServiceAccounts(ns).Get(ctx, sa, metav1.GetOptions{}); err != nil && !apierrors.IsForbidden(err) {
		return fmt.Errorf("audit mark as %s: %w", user, err)
	}
	return Poll(ctx, time.Minute, 250*time.Millisecond, func() (bool, error) {
		after, err := CountAuditFile(auditLog, user, mark.Add(-time.Second), mark.Add(time.Hour))
		return after.ByCall["get serviceaccounts"] > 0, err
	}, "the audit log to hold the harness's mark")
}

// operatorUser is the API server's name of the operator in ns: its pod's
// service account.
func (e *Env) operatorUser(ctx context.Context, ns string) (string, error) {
	d, err := e.Cluster.Kube.AppsV1().Deployments(ns).Get(ctx, "operator", metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	sa := d.Spec.Template.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	return "system:serviceaccount:" + ns + ":" + sa, nil
}

// applyAll applies objs with workers at once.
func (e *Env) applyAll(ctx context.Context, objs []*unstructured.Unstructured, workers int) error {
	return forEach(ctx, objs, workers, func(o *unstructured.Unstructured) error {
		_, err := e.Cluster.Apply(ctx, o)
		return err
	})
}

// deleteAll deletes objs with workers at once, without waiting for them.
func (e *Env) deleteAll(ctx context.Context, objs []*unstructured.Unstructured, workers int) error {
	return forEach(ctx, objs, workers, func(o *unstructured.Unstructured) error {
		return e.Cluster.Delete(ctx, o, 0)
	})
}

// forEach runs do for every object, workers at a time, and returns the
// first error.
func forEach(ctx context.Context, objs []*unstructured.Unstructured, workers int, do func(*unstructured.Unstructured) error) error {
	work := make(chan *unstructured.Unstructured)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for range workers {
		wg.Go(func() {
			for o := range work {
				if err := do(o); err != nil {
					mu.Lock()
					first = cmp.Or(first, err)
					mu.Unlock()
				}
			}
		})
	}
	for _, o := range objs {
		select {
		case work <- o:
		case <-ctx.Done():
		}
	}
	close(work)
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return first
}

var statefulSets = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"}

// countChildren counts the objects of gvr in the operator namespace whose
// parent (label tailscale.com/parent-resource) is one of names.
func (e *Env) countChildren(ctx context.Context, operatorNS string, gvr schema.GroupVersionResource, names map[string]bool) (int, error) {
	list, err := e.Cluster.Dyn.Resource(gvr).Namespace(operatorNS).List(ctx, metav1.ListOptions{LabelSelector: "tailscale.com/parent-resource-ns=default"})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, o := range list.Items {
		if names[o.GetLabels()["tailscale.com/parent-resource"]] {
			n++
		}
	}
	return n, nil
}

// scaleLeft names what is left of the scale part: parents still present
// (finalizers not done) and the objects of each child kind labelled with
// one of them.
func (e *Env) scaleLeft(ctx context.Context, operatorNS string, names map[string]bool) ([]string, error) {
	var left []string
	for _, gvr := range []schema.GroupVersionResource{{Version: "v1", Resource: "services"}, {Group: "networking.k8s.io", Version: "v1", Resource: "ingresses"}} {
		list, err := e.Cluster.Dyn.Resource(gvr).Namespace("default").List(ctx, metav1.ListOptions{LabelSelector: scaleLabel + "=true"})
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, err
		}
		if n := len(list.Items); n > 0 {
			left = append(left, fmt.Sprintf("%d %s", n, gvr.Resource))
		}
	}
	for _, gvr := range childKinds() {
		n, err := e.countChildren(ctx, operatorNS, gvr, names)
		if err != nil {
			return nil, err
		}
		if n > 0 {
			left = append(left, fmt.Sprintf("%d %s in %s", n, gvr.Resource, operatorNS))
		}
	}
	return left, nil
}

// rssSampler reads a pod's RSS at an interval and keeps the highest.
type rssSampler struct {
	done chan struct{}
	peak chan float64
}

func startRSSSampler(podUID string, every time.Duration) *rssSampler {
	s := &rssSampler{done: make(chan struct{}), peak: make(chan float64, 1)}
	go func() {
		var peak float64
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			if b, _, err := PodRSS("/proc", podUID); err == nil {
				peak = max(peak, float64(b)/(1<<20))
			}
			select {
			case <-s.done:
				s.peak <- peak
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// stop ends the sampling and returns the peak in MiB.
func (s *rssSampler) stop() float64 {
	close(s.done)
	return <-s.peak
}

// ScaleLines are the report's lines of the scale part.
func ScaleLines(cfg Config, r [2]ScaleResult, errs [2]error) ([]Line, []string) {
	n := fmt.Sprintf("%d Services and %d Ingresses", cfg.ScaleServices, cfg.ScaleIngresses)
	lines := []Line{
		{What: "scale: " + n + " applied at once, until every proxy's StatefulSet exists (proxy pods Pending)", Unit: "s"},
		{What: "scale: operator peak RSS meanwhile", Unit: "MiB"},
		{What: "scale: operator CPU time meanwhile", Unit: "s"},
		{What: "scale: operator API requests per parent meanwhile (API server audit log)", Unit: "requests"},
		{What: "scale: of which writes", Unit: "requests"},
		{What: "scale: delete every parent, until they and every proxy object are gone", Unit: "s"},
	}
	var notes []string
	values := func(x ScaleResult) []float64 {
		per := float64(x.Parents)
		return []float64{x.Created.Seconds(), x.PeakRSS, x.CPU, float64(x.API.Requests) / per, float64(x.API.Writes) / per, x.Deleted.Seconds()}
	}
	o, t := values(r[0]), values(r[1])
	for k := range lines {
		measured := func(x ScaleResult) bool {
			if k == len(lines)-1 {
				return x.DeleteMeasured
			}
			return x.CreateMeasured
		}
		var why []string
		for i, s := range Sides() {
			if !measured(r[i]) {
				msg := "not measured"
				if errs[i] != nil {
					msg = errs[i].Error()
				}
				why = append(why, s.Name+": "+msg)
			}
		}
		if len(why) > 0 {
			lines[k].Missing = strings.Join(why, "; ")
			continue
		}
		lines[k].Samples, lines[k].Official, lines[k].Tailplane = 1, o[k], t[k]
	}
	for i, s := range Sides() {
		x := r[i]
		if x.Parents > 0 && x.API.Requests > 0 {
			notes = append(notes, fmt.Sprintf("scale, %s: applying took %s; API requests per parent: %s", s.Name, x.Applied.Round(time.Millisecond), x.API.PerObject(x.Parents)))
		}
		if len(x.Left) > 0 {
			notes = append(notes, fmt.Sprintf("scale, %s: left after the delete: %s", s.Name, strings.Join(x.Left, ", ")))
		}
	}
	return lines, notes
}

// WriteScale prints the scale part's table and details as Markdown for
// docs/performance.md.
func WriteScale(w io.Writer, cfg Config, lines []Line, notes []string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "## Scale, side by side with the official operator (%s)\n\n", OfficialVersion)
	fmt.Fprintf(&b, "`%s -- -scale -scale-services %d -scale-ingresses %d`, devcluster's real node, each operator alone.\n\n",
		Command, cfg.ScaleServices, cfg.ScaleIngresses)
	b.WriteString(PerformanceTable(lines))
	if len(notes) > 0 {
		b.WriteString("\n### Details\n\n")
		for _, n := range notes {
			b.WriteString("- " + n + "\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
