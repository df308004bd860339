package connector

import (
	"context"
	"reflect"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/tailplane/tailplane/crds/tailscale/v1alpha1"
	"github.com/tailplane/tailplane/handlers/lib/cluster"
	"github.com/tailplane/tailplane/handlers/lib/conditions"
	"github.com/tailplane/tailplane/handlers/lib/pipeline"
	"github.com/tailplane/tailplane/handlers/lib/proxyclassrules"
	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/handlers/lib/resources"
	"github.com/tailplane/tailplane/internal/tailnet"
	"github.com/tailplane/tailplane/runtime"
)

type module struct{ d *cluster.Deps }

// Register adds the Connector module to the pipeline: every Connector gets
// its replicas; a change of routes, exit node or tags reaches the running
// replicas without new devices; scaling down deletes the removed replicas'
// devices; delete removes every device, child and the finalizer.
func Register(op *runtime.Operator, d *cluster.Deps, p *pipeline.Pipeline) {
	m := &module{d: d}
	p.Register(op, pipeline.Module{
		ID: "connector", Resource: resources.Connectors, Kind: "Connector",
		ParentType: ParentType, Role: cluster.RoleConnector, ProxyKind: proxyclassrules.Connector, ClusterScoped: true,
		IsOurs:  func(*unstructured.Unstructured) bool { return true },
		Tailnet: pipeline.SpecTailnet,
		Plan:    m.plan,
		Report:  m.report,
		Release: func(context.Context, *unstructured.Unstructured, []proxyset.Device) error { return nil },
	})
}

func decode(obj *unstructured.Unstructured) (*v1alpha1.Connector, error) {
	var cn v1alpha1.Connector
	if err := cluster.FromUnstructured(obj, &cn); err != nil {
		return nil, runtime.Permanent(err)
	}
	cn.APIVersion, cn.Kind = v1alpha1.GroupVersion.String(), "Connector"
	return &cn, nil
}

func (m *module) plan(_ context.Context, obj *unstructured.Unstructured) (*pipeline.Plan, error) {
	cn, err := decode(obj)
	if err != nil {
		return nil, err
	}
	return Plan(cn, m.d.Settings), nil
}

// report writes the Connector's status and posts the official Warning
// Events for refused and failed Connectors.
func (m *module) report(ctx context.Context, obj *unstructured.Unstructured, out pipeline.Outcome) error {
	cn, err := decode(obj)
	if err != nil {
		return err
	}
	st := Status(cn, out)
	// Posted with a new ConnectorReady only (not again at each restart).
	if ready := meta.FindStatusCondition(st.Conditions, ConditionReady); ready != nil && conditions.Changed(cn.Status.Conditions, *ready) {
		switch out.Stage {
		case pipeline.Invalid:
			m.d.Post(cn, corev1.EventTypeWarning, ReasonConnectorInvalid, ready.Message)
		case pipeline.Failed:
			m.d.Post(cn, corev1.EventTypeWarning, ReasonConnectorCreationFailed, ready.Message)
		case pipeline.Waiting:
			m.d.Post(cn, corev1.EventTypeWarning, ReasonProxyPending, out.Message)
		}
	}
	if out.Devices != nil || out.Stage == pipeline.Ready || out.Stage == pipeline.Pending {
		// (Outcomes of a refused spec say nothing of the devices.)
		m.approval(cn, out.Devices, &st)
	}
	if reflect.DeepEqual(st, cn.Status) {
		return nil
	}
	return m.d.PatchStatus(ctx, resources.Connectors, "", cn.Name, statusPatch(st))
}

// approval sets RoutesApproved in st, and warns about routes still
// unapproved when the grace ends (through the queue, not a sleep).
func (m *module) approval(cn *v1alpha1.Connector, devices []proxyset.Device, st *v1alpha1.ConnectorStatus) {
	be, err := m.d.Tailnets.For(cn.Spec.Tailnet)
	a := RouteApproval(cn.Status.Conditions, devices, time.Now(), m.d.RouteApprovalGrace, err == nil && tailnet.IsHeadscale(be))
	st.Conditions = SetApproval(st.Conditions, a)
	if a.Warn {
		m.d.Post(cn, corev1.EventTypeWarning, ReasonRoutesNotApproved, a.Condition.Message)
	}
	if a.Recheck > 0 {
		m.d.Op.Enqueue(resources.Connectors, cn.Name, a.Recheck)
	}
}

// statusPatch is st as a merge patch that sets every field: an empty one
// is null, so that routes and devices that are gone go from the status,
// but isExitNode and isAppConnector are always there, false included, as
// the official operator writes them (kubectl get shows "false", not "").
func statusPatch(st v1alpha1.ConnectorStatus) map[string]any {
	orNil := func(empty bool, v any) any {
		if empty {
			return nil
		}
		return v
	}
	return map[string]any{
		"conditions":     orNil(len(st.Conditions) == 0, st.Conditions),
		"subnetRoutes":   orNil(st.SubnetRoutes == "", st.SubnetRoutes),
		"isExitNode":     st.IsExitNode,
		"isAppConnector": st.IsAppConnector,
		"tailnetIPs":     orNil(len(st.TailnetIPs) == 0, st.TailnetIPs),
		"hostname":       orNil(st.Hostname == "", st.Hostname),
		"devices":        orNil(len(st.Devices) == 0, st.Devices),
	}
}
