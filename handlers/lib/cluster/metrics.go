package cluster

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tailplane/tailplane/crds/tailscale/v1alpha1"
	"github.com/tailplane/tailplane/handlers/lib/proxyclassrules"
	"github.com/tailplane/tailplane/handlers/lib/resources"
)

// applyMetrics gives the proxy run by sts the metrics Service (and
// ServiceMonitor) its ProxyClass asks for, and removes them when it no
// longer does. Removal costs one delete per proxy and operator lifetime:
// afterwards the absence is remembered until the next apply.
func (d *Deps) applyMetrics(ctx context.Context, sts *appsv1.StatefulSet, pc *v1alpha1.ProxyClass, kind proxyclassrules.ProxyKind) error {
	ns, name := sts.Namespace, proxyclassrules.MetricsServiceName(sts.Name)
	svcKey := resources.Services.String() + "/" + ns + "/" + name
	smKey := proxyclassrules.ServiceMonitorResource.String() + "/" + ns + "/" + name
	if !proxyclassrules.MetricsWanted(pc, kind) {
		// The ServiceMonitor is owned by the Service: deleting the Service
		// lets the garbage collector take both.
		return d.deleteOnce(svcKey, func() error {
			return d.Kube.CoreV1().Services(ns).Delete(ctx, name, metav1.DeleteOptions{})
		})
	}
	svc := proxyclassrules.MetricsService(sts)
	if err := d.apply(ctx, svc); err != nil {
		return err
	}
	d.applied.present(svcKey)
	if !proxyclassrules.ServiceMonitorWanted(pc, kind) {
		return d.deleteOnce(smKey, func() error {
			err := d.Dyn.Resource(proxyclassrules.ServiceMonitorResource).Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{})
			if meta.IsNoMatchError(err) {
				return nil // no ServiceMonitor CRD: nothing to delete
			}
			return err
		})
	}
	// The ServiceMonitor's owner reference needs the Service's UID.
	live, err := d.Kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("read metrics Service %s/%s: %w", ns, name, err)
	}
	if err := d.applyUnstructured(ctx, proxyclassrules.ServiceMonitor(live, pc), proxyclassrules.ServiceMonitorResource); err != nil {
		return err
	}
	d.applied.present(smKey)
	return nil
}

// deleteOnce runs del unless key is known to be absent, and remembers the
// absence when del succeeds or finds nothing.
func (d *Deps) deleteOnce(key string, del func() error) error {
	if d.applied.isAbsent(key) {
		return nil
	}
	if err := del(); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	d.applied.forget(key)
	d.applied.absent(key)
	return nil
}
