package proxygroup

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/tailplane/tailplane/crds/tailscale/v1alpha1"
	"github.com/tailplane/tailplane/handlers/lib/cluster"
	"github.com/tailplane/tailplane/handlers/lib/conditions"
	"github.com/tailplane/tailplane/handlers/lib/groupmember"
	"github.com/tailplane/tailplane/handlers/lib/pipeline"
	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/handlers/lib/resources"
	"github.com/tailplane/tailplane/handlers/lib/tsservice"
	"github.com/tailplane/tailplane/proxy/config"
	"github.com/tailplane/tailplane/runtime"
)

// registerAPIServer adds the cleanup of kube-apiserver groups: their
// Tailscale Service, shared certificate and impersonation binding.
func registerAPIServer(op *runtime.Operator, g *groups) {
	op.OnDelete(resources.ProxyGroups, "proxygroup-apiserver-cleanup", func(ctx context.Context, ev *runtime.Event) (any, error) {
		return nil, cluster.Retry(g.releaseAPIServer(ctx, ev.Object), ev.Retry)
	}, runtime.When(ofType(v1alpha1.ProxyGroupTypeKubeAPIServer)))
}

// planAPIServer makes the group's Tailscale Service exist (owned by the
// group; someone else's makes the group invalid) and its certificate
// Secret, and returns the replicas' configs.
func (g *groups) planAPIServer(ctx context.Context, pg *v1alpha1.ProxyGroup, plan *pipeline.Plan) (*pipeline.Plan, error) {
	m := apiServerMember(pg, plan.Tags)
	be, err := groupmember.Backend(g.d, pg)
	if err != nil {
		return nil, err
	}
	existing, err := be.GetService(ctx, m.ServiceName())
	if err != nil {
		return nil, err
	}
	claim, err := m.Desired(existing, g.d.OperatorNodeID)
	if err != nil {
		return &pipeline.Plan{Invalid: err.Error()}, nil
	}
	want := claim.Service
	if existing == nil || !tsservice.Same(*existing, want) {
		if err := be.PutService(ctx, want); err != nil {
			return nil, err
		}
	}
	if err := tsservice.Sweep(ctx, be, g.d.OperatorNodeID, m.Owner(), m.ServiceName()); err != nil {
		return nil, err
	}
	secret := tsservice.CertSecretName(apiServerHostname(pg))
	if err := tsservice.EnsureCertSecret(ctx, g.d.Kube, g.d.Settings.Namespace, secret, m.Owner()); err != nil {
		return nil, err
	}
	plan.ExtraSecrets = []string{secret}
	plan.Config = func(i int) (*config.Config, error) {
		return apiServerConfig(pg, plan.Tags, i), nil
	}
	plan.AfterApply = func(ctx context.Context, _ *proxyset.Objects) error {
		if apiServerMode(pg) == config.APIServerAuth {
			return g.d.Apply(ctx, impersonatorBinding(pg, g.d.Settings.Namespace))
		}
		return g.deleteImpersonatorBinding(ctx, pg.Name)
	}
	return plan, nil
}

func (g *groups) deleteImpersonatorBinding(ctx context.Context, group string) error {
	g.d.Forget(resources.ClusterRoleBindings, "", ImpersonatorBindingName(group))
	err := g.d.Kube.RbacV1().ClusterRoleBindings().Delete(ctx, ImpersonatorBindingName(group), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete ClusterRoleBinding %s: %w", ImpersonatorBindingName(group), err)
	}
	return nil
}

// releaseAPIServer deletes what planAPIServer made.
func (g *groups) releaseAPIServer(ctx context.Context, obj *unstructured.Unstructured) error {
	o := groupmember.OwnerOf("ProxyGroup", obj)
	if err := groupmember.SweepAll(ctx, g.d, o); err != nil {
		return err
	}
	if err := tsservice.DeleteCertSecrets(ctx, g.d.Kube, g.d.Settings.Namespace, o); err != nil {
		return err
	}
	return g.deleteImpersonatorBinding(ctx, obj.GetName())
}

// apiServerStatus adds a kube-apiserver group's conditions and URL to st:
// KubeAPIServerProxyValid, and KubeAPIServerProxyConfigured counting the
// replicas that advertise the service.
func apiServerStatus(pg *v1alpha1.ProxyGroup, out pipeline.Outcome, st *v1alpha1.ProxyGroupStatus) {
	valid := metav1.Condition{Type: ConditionAPIServerValid, Status: metav1.ConditionTrue, Reason: ReasonAPIServerValid,
		Message: ReasonAPIServerValid, ObservedGeneration: pg.Generation}
	if out.Stage == pipeline.Invalid {
		valid.Status, valid.Reason, valid.Message = metav1.ConditionFalse, reasonAPIServerInvalid, out.Message
	}
	service, domain, advertising := "svc:"+apiServerHostname(pg), "", 0
	for _, d := range out.Devices {
		if _, dom, ok := strings.Cut(d.FQDN, "."); ok && domain == "" {
			domain = dom
		}
		if d.Advertises(service) {
			advertising++
		}
	}
	configured := metav1.Condition{Type: ConditionAPIServerConfigured, Status: metav1.ConditionFalse, Reason: reasonAPIServerNoBackends,
		Message: fmt.Sprintf(groupmember.MessageBackendsAdvertising, advertising, groupmember.Replicas(pg)), ObservedGeneration: pg.Generation}
	st.URL = ""
	if advertising > 0 {
		configured.Status, configured.Reason = metav1.ConditionTrue, ReasonAPIServerConfigured
		st.URL = apiServerURL(pg, domain)
	}
	st.Conditions = conditions.Set(conditions.Set(st.Conditions, valid), configured)
}
