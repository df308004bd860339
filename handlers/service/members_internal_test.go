package service

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/tailplane/tailplane/handlers/lib/groupmember"
)

// A Service whose Tailscale Service another cluster serves too says so in a
// condition of its own, which goes when it no longer is shared.
func TestGroupMemberStatusNamesOtherClusters(t *testing.T) {
	svc := &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer}}
	m := &groupmember.ServiceMember{Kind: "Service", Hostname: "db"}
	st := groupmember.Status{Advertising: 2, Total: 2, DNSName: "db.tail1.ts.net", Addrs: []string{"100.100.0.7"},
		SharedWith: []string{"tailscale-operator-1.tail1.ts.net (n1)"}}
	conds, lb := groupMemberStatus(svc, m, st)
	shared := meta.FindStatusCondition(conds, ConditionSvcShared)
	if shared == nil || shared.Status != "True" || shared.Reason != ReasonSvcShared ||
		!strings.Contains(shared.Message, "svc:db is also served by the operator of another cluster: tailscale-operator-1.tail1.ts.net (n1)") {
		t.Fatalf("shared condition %+v", shared)
	}
	if len(lb) != 1 || lb[0].IP != "100.100.0.7" || !meta.IsStatusConditionTrue(conds, ConditionSvcConfigured) {
		t.Errorf("the rest of the status: %+v %+v", conds, lb)
	}
	svc.Status.Conditions = conds
	st.SharedWith = nil
	if conds, _ = groupMemberStatus(svc, m, st); meta.FindStatusCondition(conds, ConditionSvcShared) != nil {
		t.Errorf("no longer shared, still says so: %+v", conds)
	}
	svc.Status.Conditions = conds
	if conds, _ = groupMemberStatus(svc, nil, groupmember.Status{}); len(conds) != 0 {
		t.Errorf("left the group, conditions stay: %+v", conds)
	}
}
