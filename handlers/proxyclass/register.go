// Package proxyclass is the handler module of the ProxyClass kind: it
// validates each ProxyClass with handlers/lib/proxyclassrules, keeps its
// ProxyClassReady condition, posts the official Events, and re-handles the
// Services and Ingresses that use the class. The rules live apart, in
// handlers/lib/proxyclassrules, because handlers/lib/cluster applies them to
// every proxy and a library must not import a module.
//
// It imports runtime/, crds/, handlers/lib/cluster, handlers/lib/conditions,
// handlers/lib/proxyclassrules, handlers/lib/resources and internal/proxystate.
package proxyclass

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/tailplane/tailplane/crds/tailscale/v1alpha1"
	"github.com/tailplane/tailplane/handlers/lib/cluster"
	"github.com/tailplane/tailplane/handlers/lib/conditions"
	"github.com/tailplane/tailplane/handlers/lib/proxyclassrules"
	"github.com/tailplane/tailplane/handlers/lib/resources"
	"github.com/tailplane/tailplane/runtime"
)

// serviceMonitorCRD is the CRD a ProxyClass's metrics.serviceMonitor needs.
const serviceMonitorCRD = "servicemonitors.monitoring.coreos.com"

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

type module struct {
	d *cluster.Deps

	mu sync.Mutex
	// nodePortRange is the cluster's NodePort range once learned
	// (clusterNodePortRange).
	nodePortRange *v1alpha1.PortRange
}

// Register adds the ProxyClass handlers: each ProxyClass gets ProxyClassReady
// (and Events for invalid classes and TS_ env vars); then every Service and
// Ingress using it is handled again, so that waiting parents proceed and
// proxies pick up the class's changes. Deleting a class re-handles its users
// too (they wait again).
func Register(op *runtime.Operator, d *cluster.Deps) {
	m := &module{d: d}
	op.OnCreate(resources.ProxyClasses, "proxyclass-create", m.handle)
	op.OnUpdate(resources.ProxyClasses, "proxyclass-update", m.handle)
	op.OnResume(resources.ProxyClasses, "proxyclass-resume", m.handle)
	// Enqueued when a class it clashed with changed or went away.
	op.On(resources.ProxyClasses, "proxyclass-revalidate", m.handle, runtime.Causes(runtime.CauseEnqueue))
	op.OnDelete(resources.ProxyClasses, "proxyclass-users", func(_ context.Context, ev *runtime.Event) (any, error) {
		m.resyncUsers(ev.Object.GetName())
		return nil, nil
	}, runtime.Optional())
	op.OnEvent(resources.ProxyClasses, "proxyclass-ports-freed", func(ctx context.Context, typ watch.EventType, obj *unstructured.Unstructured) error {
		if typ != watch.Deleted {
			return nil
		}
		return m.revalidateClashing(ctx, obj.GetName())
	})
}

func (m *module) handle(ctx context.Context, ev *runtime.Event) (any, error) {
	pc := &v1alpha1.ProxyClass{}
	if err := cluster.FromUnstructured(ev.Object, pc); err != nil {
		return nil, runtime.Permanent(err)
	}
	pc.APIVersion, pc.Kind = v1alpha1.GroupVersion.String(), "ProxyClass"
	smCRD := false
	if sm := pc.Spec.Metrics; sm != nil && sm.ServiceMonitor != nil && sm.ServiceMonitor.Enable {
		_, err := m.d.Dyn.Resource(crdResource).Get(ctx, serviceMonitorCRD, metav1.GetOptions{})
		switch {
		case err == nil:
			smCRD = true
		case !apierrors.IsNotFound(err) && !apierrors.IsForbidden(err):
			return nil, fmt.Errorf("look up CRD %s: %w", serviceMonitorCRD, err)
		}
	}
	errs := proxyclassrules.Validate(pc, smCRD)
	nodePortErrs, err := m.validateNodePorts(ctx, pc)
	if err != nil {
		return nil, err
	}
	errs = append(errs, nodePortErrs...)
	cond := proxyclassrules.Condition(pc, errs, time.Now().Truncate(time.Second))
	// Warned about once per generation (the condition records the one
	// validated), not again at each restart.
	if conditions.Changed(pc.Status.Conditions, cond) {
		for _, w := range proxyclassrules.EnvWarnings(pc) {
			m.d.Post(pc, corev1.EventTypeWarning, proxyclassrules.ReasonCustomTSEnvVar, w)
		}
		if len(errs) > 0 {
			m.d.Post(pc, corev1.EventTypeWarning, v1alpha1.ReasonProxyClassInvalid, cond.Message)
		}
		if err := m.revalidateClashing(ctx, pc.Name); err != nil {
			return nil, err
		}
	}
	conds := conditions.Set(pc.Status.Conditions, cond)
	if !reflect.DeepEqual(conds, pc.Status.Conditions) {
		// Written now, not in the cycle's patch: the users re-handled next
		// must see it.
		if err := m.d.PatchStatus(ctx, resources.ProxyClasses, "", pc.Name, map[string]any{"conditions": conds}); err != nil {
			return nil, err
		}
	}
	m.resyncUsers(pc.Name)
	return nil, nil
}

func (m *module) resyncUsers(name string) {
	m.d.EnqueueIndexed(cluster.IndexServicesByProxyClass, name, resources.Services)
	m.d.EnqueueIndexed(cluster.IndexIngressesByProxyClass, name, resources.Ingresses)
	m.d.EnqueueIndexed(cluster.IndexConnectorsByProxyClass, name, resources.Connectors)
	m.d.EnqueueIndexed(cluster.IndexProxyGroupsByProxyClass, name, resources.ProxyGroups)
}
