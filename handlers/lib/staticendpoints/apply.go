package staticendpoints

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/tailplane/tailplane/crds/tailscale/v1alpha1"
	"github.com/tailplane/tailplane/handlers/lib/cluster"
	"github.com/tailplane/tailplane/handlers/lib/groupmember"
	"github.com/tailplane/tailplane/handlers/lib/pipeline"
	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/handlers/lib/resources"
	"github.com/tailplane/tailplane/internal/proxystate"
	"github.com/tailplane/tailplane/proxy/config"
	"github.com/tailplane/tailplane/runtime"
)

// indexStaticEndpointClasses: "" -> the ProxyClasses with
// spec.staticEndpoints.nodePort (a staticClass each), for the Node watch.
const indexStaticEndpointClasses = "proxyclasses-with-static-endpoints"

// staticClass is a ProxyClass with static endpoints and its node selector.
type staticClass struct {
	name     string
	selector labels.Selector
}

// Groups sets up the static endpoints of ProxyGroups, and remembers each
// group's for its status.
type Groups struct {
	d *cluster.Deps

	mu sync.Mutex
	// endpoints are each group's replicas' static endpoints by hostname,
	// as last configured (Plan).
	endpoints map[string]map[string][]string
}

// Register returns the Groups of the operator, and has a change of a
// Node's addresses or labels handle again the groups whose ProxyClass
// selects the Node (their advertised endpoints follow the nodes'
// ExternalIPs).
func Register(op *runtime.Operator, d *cluster.Deps) *Groups {
	g := &Groups{d: d, endpoints: map[string]map[string][]string{}}
	op.Index(resources.ProxyClasses, indexStaticEndpointClasses, func(obj *unstructured.Unstructured) map[string]any {
		if _, found, _ := unstructured.NestedMap(obj.Object, "spec", "staticEndpoints", "nodePort"); !found {
			return nil
		}
		sel, _, _ := unstructured.NestedStringMap(obj.Object, "spec", "staticEndpoints", "nodePort", "selector")
		return map[string]any{"": staticClass{name: obj.GetName(), selector: labels.SelectorFromSet(sel)}}
	})
	op.Watch(resources.Nodes, "proxygroup-static-endpoint-nodes", func(_ watch.EventType, old, obj *unstructured.Unstructured) []runtime.Key {
		if old != nil && maps.Equal(old.GetLabels(), obj.GetLabels()) && reflect.DeepEqual(nodeAddresses(old), nodeAddresses(obj)) {
			return nil
		}
		x := op.GetIndex(indexStaticEndpointClasses)
		if x == nil {
			return nil
		}
		var keys []runtime.Key
		for _, v := range x.Get("") {
			c, ok := v.(staticClass)
			if !ok {
				continue
			}
			if c.selector.Matches(labels.Set(obj.GetLabels())) || (old != nil && c.selector.Matches(labels.Set(old.GetLabels()))) {
				keys = append(keys, g.d.Indexed(cluster.IndexProxyGroupsByProxyClass, c.name, resources.ProxyGroups)...)
			}
		}
		return keys
	})
	return g
}

func nodeAddresses(obj *unstructured.Unstructured) []any {
	a, _, _ := unstructured.NestedSlice(obj.Object, "status", "addresses")
	return a
}

// Plan adds the group's static endpoints to plan: the
// replicas' NodePort Services (applied with the proxy), their listenPort
// and staticEndpoints, and the deletion of the Services of replicas the
// group no longer has (or of all, when its ProxyClass has no static
// endpoints). It returns a message when the endpoints cannot be set up
// (out of ports, no node or no ExternalIP): the group then fails, and
// nothing is applied.
func (g *Groups) Plan(ctx context.Context, pg *v1alpha1.ProxyGroup, plan *pipeline.Plan) (string, error) {
	ns := g.d.Settings.Namespace
	replicas := len(plan.Hostnames)
	pc, waiting, err := g.d.ProxyClassFor(ctx, plan.ProxyClass)
	if err != nil || waiting != "" {
		return "", err // the pipeline reports the waiting
	}
	var np *v1alpha1.NodePortConfig
	if pc != nil && pc.Spec.StaticEndpoints != nil {
		np = pc.Spec.StaticEndpoints.NodePort
	}
	sel := labels.Set{proxystate.LabelParentType: groupmember.ParentType}
	if np == nil {
		sel[proxystate.LabelParentName] = proxyset.TruncateLabelValue(pg.Name)
	}
	list, err := g.d.Kube.CoreV1().Services(ns).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(sel).String()})
	if err != nil {
		return "", fmt.Errorf("list ProxyGroup Services: %w", err)
	}
	base := proxyset.Parent{Type: groupmember.ParentType, Name: pg.Name}.Names().Base
	mine, stale, used := map[string]uint16{}, []string{}, map[string]uint16{}
	var kept []corev1.Service
	for _, s := range list.Items {
		ordinal, ok := nodePortOrdinal(&s, base)
		switch {
		case ok && s.Labels[proxystate.LabelParentName] == proxyset.TruncateLabelValue(pg.Name):
			if np == nil || ordinal >= replicas {
				stale = append(stale, s.Name)
				continue
			}
			kept = append(kept, s)
			if len(s.Spec.Ports) == 1 {
				mine[s.Name] = uint16(s.Spec.Ports[0].NodePort)
			}
		case s.Spec.Type == corev1.ServiceTypeNodePort && len(s.Spec.Ports) == 1:
			used[s.Name] = uint16(s.Spec.Ports[0].NodePort)
		}
	}
	plan.AfterApply = chain(plan.AfterApply, func(ctx context.Context, _ *proxyset.Objects) error {
		var errs []error
		for _, name := range stale {
			if err := g.d.Kube.CoreV1().Services(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("delete static endpoint Service %s/%s: %w", ns, name, err))
			}
		}
		return errors.Join(errs...)
	})
	if np == nil {
		g.setEndpoints(pg.Name, nil)
		return "", nil
	}
	services := make([]string, replicas)
	for i := range services {
		services[i] = nodePortServiceName(base, i)
	}
	ports, err := allocateNodePorts(services, np.Ports, mine, used, pc.Name)
	if err != nil {
		return msgNodePortsPrefix + err.Error(), nil
	}
	nodes, err := g.d.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(np.Selector).String()})
	if err != nil {
		return "", fmt.Errorf("list the Nodes of ProxyClass %s's static endpoints: %w", pc.Name, err)
	}
	// What the replicas were last configured with; after a restart of the
	// operator, what the group's status says.
	current := g.endpointsOf(pg.Name)
	if current == nil {
		current = map[string][]string{}
		for _, d := range pg.Status.Devices {
			current[d.Hostname] = d.StaticEndpoints
		}
	}
	endpoints := map[string][]string{}
	for i, h := range plan.Hostnames {
		eps, err := staticEndpoints(nodes.Items, ports[services[i]], current[h], pc.Name)
		if err != nil {
			return msgEndpointsPrefix + err.Error(), nil
		}
		endpoints[h] = eps
	}
	listenPort := pickListenPort(kept)
	render := plan.Config
	plan.Config = func(i int) (*config.Config, error) {
		cfg, err := render(i)
		if err != nil {
			return nil, err
		}
		cfg.ListenPort, cfg.StaticEndpoints = int(listenPort), endpoints[plan.Hostnames[i]]
		return cfg, nil
	}
	extra := plan.Extra
	plan.Extra = func(objs *proxyset.Objects) []any {
		var out []any
		if extra != nil {
			out = extra(objs)
		}
		for i := range replicas {
			out = append(out, nodePortService(ns, base, i, maps.Clone(objs.StatefulSet.Labels), listenPort, ports[services[i]]))
		}
		// tsnet binds its port when it starts: the replicas restart when it
		// changes (as the official's, whose port is in the Pods' env).
		tmpl := &objs.StatefulSet.Spec.Template
		if tmpl.Annotations == nil {
			tmpl.Annotations = map[string]string{}
		}
		tmpl.Annotations[proxyset.AnnotationListenPort] = strconv.Itoa(int(listenPort))
		return out
	}
	g.setEndpoints(pg.Name, endpoints)
	return "", nil
}

func chain(first, then func(context.Context, *proxyset.Objects) error) func(context.Context, *proxyset.Objects) error {
	if first == nil {
		return then
	}
	return func(ctx context.Context, objs *proxyset.Objects) error {
		if err := first(ctx, objs); err != nil {
			return err
		}
		return then(ctx, objs)
	}
}

// setEndpoints records the endpoints the group's replicas were configured
// with (by hostname), which the group's status reports.
func (g *Groups) setEndpoints(group string, eps map[string][]string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if eps == nil {
		delete(g.endpoints, group)
		return
	}
	g.endpoints[group] = eps
}

// SetStatus sets the staticEndpoints of the group's status devices
// (by hostname) to what its replicas were last configured with, as the
// official reports its replicas' input.
func (g *Groups) SetStatus(group string, devices []v1alpha1.TailnetDevice) {
	eps := g.endpointsOf(group)
	for i := range devices {
		devices[i].StaticEndpoints = eps[devices[i].Hostname]
	}
}

func (g *Groups) endpointsOf(group string) map[string][]string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.endpoints[group]
}
