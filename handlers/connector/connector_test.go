package connector_test

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/tailplane/tailplane/crds/tailscale/v1alpha1"
	"github.com/tailplane/tailplane/handlers/connector"
	"github.com/tailplane/tailplane/handlers/lib/pipeline"
	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/proxy/config"
)

func seed(t *testing.T, file string) *v1alpha1.Connector {
	t.Helper()
	b, err := os.ReadFile("../../examples/seed/" + file)
	if err != nil {
		t.Fatal(err)
	}
	var cn v1alpha1.Connector
	if err := yaml.UnmarshalStrict(b, &cn); err != nil {
		t.Fatal(err)
	}
	return &cn
}

func TestSeedConnectors(t *testing.T) {
	for _, tc := range []struct {
		file      string
		hostnames []string
		want      config.Connector
	}{
		{"04-connector-subnet-router.yaml", []string{"ts-pod-cidrs-0"}, config.Connector{Routes: []string{"10.42.0.0/16"}}},
		{"05-connector-exit-node.yaml", []string{"exit-node-0", "exit-node-1"}, config.Connector{ExitNode: true}},
		{"06-connector-app-connector.yaml", []string{"app-connector-connector"}, config.Connector{AppConnector: true}},
	} {
		cn := seed(t, tc.file)
		if err := connector.Validate(cn, []string{"tag:k8s"}); err != nil {
			t.Errorf("%s: %v", tc.file, err)
		}
		if got := connector.Hostnames(cn); !slices.Equal(got, tc.hostnames) {
			t.Errorf("%s: hostnames %v, want %v", tc.file, got, tc.hostnames)
		}
		for i := range tc.hostnames {
			c := connector.Config(cn, []string{"tag:k8s"}, i)
			if err := c.Validate(); err != nil {
				t.Errorf("%s replica %d: the proxy would refuse its config: %v", tc.file, i, err)
			}
			if c.Hostname != tc.hostnames[i] || c.Role != config.RoleConnector || !slices.Equal(c.Connector.Routes, tc.want.Routes) ||
				c.Connector.ExitNode != tc.want.ExitNode || c.Connector.AppConnector != tc.want.AppConnector {
				t.Errorf("%s replica %d: config %+v %+v", tc.file, i, c, c.Connector)
			}
		}
	}
}

func TestHostnames(t *testing.T) {
	n := func(v int32) *int32 { return &v }
	for _, tc := range []struct {
		spec v1alpha1.ConnectorSpec
		want []string
	}{
		{v1alpha1.ConnectorSpec{}, []string{"cn-connector"}},
		{v1alpha1.ConnectorSpec{Hostname: "router"}, []string{"router"}},
		{v1alpha1.ConnectorSpec{HostnamePrefix: "r", Replicas: n(3)}, []string{"r-0", "r-1", "r-2"}},
		{v1alpha1.ConnectorSpec{Replicas: n(2)}, []string{"cn-connector-0", "cn-connector-1"}},
		{v1alpha1.ConnectorSpec{Replicas: n(0)}, []string{}},
	} {
		got := connector.Hostnames(&v1alpha1.Connector{ObjectMeta: metav1.ObjectMeta{Name: "cn"}, Spec: tc.spec})
		if !slices.Equal(got, tc.want) {
			t.Errorf("%+v: %v, want %v", tc.spec, got, tc.want)
		}
	}
}

// Each bad spec gets one specific message, the official operator's where
// it has one.
func TestValidate(t *testing.T) {
	n := func(v int32) *int32 { return &v }
	routes := func(r ...string) *v1alpha1.SubnetRouter { return &v1alpha1.SubnetRouter{AdvertiseRoutes: r} }
	for _, tc := range []struct {
		spec v1alpha1.ConnectorSpec
		want string
	}{
		{v1alpha1.ConnectorSpec{}, "must be configured as at least one of subnet router, exit node or app connector"},
		{v1alpha1.ConnectorSpec{ExitNode: true, AppConnector: &v1alpha1.AppConnector{}}, "must not be also configured as a subnet router or exit node"},
		{v1alpha1.ConnectorSpec{ExitNode: true, Hostname: "h", Replicas: n(2)}, "cannot specify a hostname. Instead, use a hostnamePrefix"},
		{v1alpha1.ConnectorSpec{ExitNode: true, Hostname: "h", HostnamePrefix: "p"}, "cannot use both a hostname and hostname prefix"},
		{v1alpha1.ConnectorSpec{SubnetRouter: routes("10.0.0.1/8")}, "route 10.0.0.1/8 has non-address bits set; expected 10.0.0.0/8"},
		{v1alpha1.ConnectorSpec{SubnetRouter: routes("10.0.0.0/8", "10.1.0.0/16")}, "route 10.1.0.0/16 overlaps route 10.0.0.0/8"},
		{v1alpha1.ConnectorSpec{SubnetRouter: routes("100.64.0.0/12")}, "overlaps the tailnet's own addresses 100.64.0.0/10"},
		{v1alpha1.ConnectorSpec{SubnetRouter: routes("nonsense")}, "route nonsense is invalid"},
		{v1alpha1.ConnectorSpec{SubnetRouter: routes()}, "no routes defined"},
		{v1alpha1.ConnectorSpec{ExitNode: true, Tags: v1alpha1.Tags{"k8s"}}, "spec.tags"},
	} {
		err := connector.Validate(&v1alpha1.Connector{ObjectMeta: metav1.ObjectMeta{Name: "cn"}, Spec: tc.spec}, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: got %v, want %q", tc.spec, err, tc.want)
		}
	}
}

func TestStatus(t *testing.T) {
	cn := seed(t, "04-connector-subnet-router.yaml")
	cn.Generation = 3
	st := connector.Status(cn, pipeline.Outcome{Stage: pipeline.Ready, Devices: []proxyset.Device{
		{ID: "n1", FQDN: "ts-pod-cidrs-0.tail.ts.net", IPs: []string{"100.64.0.1"}}}})
	c := st.Conditions[0]
	if c.Type != "ConnectorReady" || c.Status != "True" || c.Reason != "ConnectorCreated" || c.ObservedGeneration != 3 {
		t.Fatalf("condition %+v", c)
	}
	if st.SubnetRoutes != "10.42.0.0/16" || st.IsExitNode || st.Hostname != "ts-pod-cidrs-0.tail.ts.net" || len(st.Devices) != 1 || st.TailnetIPs[0] != "100.64.0.1" {
		t.Fatalf("status %+v", st)
	}
	st = connector.Status(cn, pipeline.Outcome{Stage: pipeline.Invalid, Message: "route x is invalid"})
	if c := st.Conditions[0]; c.Reason != "ConnectorInvalid" || c.Message != "Connector is invalid: route x is invalid" || c.Status != "False" {
		t.Fatalf("invalid: %+v", c)
	}
	st = connector.Status(cn, pipeline.Outcome{Stage: pipeline.Failed, Message: "tailnet API: 403"})
	if c := st.Conditions[0]; c.Reason != "ConnectorCreationFailed" || c.Message != "Failed creating Connector: tailnet API: 403" {
		t.Fatalf("failed: %+v", c)
	}
}

// A refused spec reaches no device: status.subnetRoutes (and the exit node
// and app connector flags) keep what the devices were last given, as the
// official operator keeps them, not the refused values.
func TestStatusKeepsLastValidRoutes(t *testing.T) {
	cn := seed(t, "04-connector-subnet-router.yaml")
	cn.Status = v1alpha1.ConnectorStatus{SubnetRoutes: "10.42.0.0/16"}
	cn.Spec.SubnetRouter.AdvertiseRoutes = []string{"10.42.0.1/16"}
	cn.Spec.ExitNode = true
	for _, stage := range []pipeline.Stage{pipeline.Invalid, pipeline.Failed} {
		st := connector.Status(cn, pipeline.Outcome{Stage: stage, Message: "refused"})
		if st.SubnetRoutes != "10.42.0.0/16" || st.IsExitNode {
			t.Errorf("stage %v: status %+v shows the refused spec", stage, st)
		}
	}
	if st := connector.Status(cn, pipeline.Outcome{Stage: pipeline.Pending}); st.SubnetRoutes != "10.42.0.1/16" || !st.IsExitNode {
		t.Errorf("provisioned: status %+v", st)
	}
}

// Unapproved routes are pending for the grace (measured from the stored
// condition, so a restart does not restart it), then RoutesNotApproved
// with one warning; approved routes make the condition True; a device
// advertising none leaves no condition.
func TestRouteApproval(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	grace := 30 * time.Second
	unapproved := []proxyset.Device{{ID: "7", FQDN: "sr-0.tail.ts.net", AdvertisedRoutes: []string{"10.0.0.0/8", "10.1.0.0/16"}, ApprovedRoutes: []string{"10.1.0.0/16"}}}

	a := connector.RouteApproval(nil, unapproved, now, grace, false)
	if a.Condition == nil || a.Condition.Reason != connector.ReasonRoutesPendingApproval || a.Warn || a.Recheck != grace {
		t.Fatalf("first sight: %+v %+v", a, a.Condition)
	}
	conds := connector.SetApproval(nil, a)

	a = connector.RouteApproval(conds, unapproved, now.Add(10*time.Second), grace, false)
	if a.Condition.Reason != connector.ReasonRoutesPendingApproval || a.Warn || a.Recheck != 20*time.Second {
		t.Fatalf("within the grace: %+v", a)
	}
	approved := []proxyset.Device{{ID: "7", FQDN: "sr-0.tail.ts.net", AdvertisedRoutes: []string{"10.0.0.0/8"}, ApprovedRoutes: []string{"10.0.0.0/8"}}}
	if a := connector.RouteApproval(conds, approved, now.Add(10*time.Second), grace, false); a.Condition.Status != metav1.ConditionTrue || a.Warn {
		t.Fatalf("auto-approved within the grace: %+v", a)
	}

	a = connector.RouteApproval(conds, unapproved, now.Add(grace), grace, false)
	if a.Condition.Reason != connector.ReasonRoutesNotApproved || !a.Warn || a.Recheck != 0 ||
		!strings.Contains(a.Condition.Message, "10.0.0.0/8 by sr-0. Approve them in the tailnet's admin console") {
		t.Fatalf("after the grace: %+v", a.Condition)
	}
	conds = connector.SetApproval(conds, a)
	if a := connector.RouteApproval(conds, unapproved, now.Add(time.Hour), grace, false); a.Warn {
		t.Fatal("warned twice about the same routes")
	}

	// Another unapproved route starts the grace over.
	more := []proxyset.Device{{ID: "7", FQDN: "sr-0.tail.ts.net", AdvertisedRoutes: []string{"10.0.0.0/8", "10.2.0.0/16"}}}
	a = connector.RouteApproval(conds, more, now.Add(time.Hour), grace, false)
	if a.Condition.Reason != connector.ReasonRoutesPendingApproval || !a.Restart || a.Warn {
		t.Fatalf("new routes: %+v", a)
	}
	if c := connector.SetApproval(conds, a)[0]; !c.LastTransitionTime.Time.Equal(now.Add(time.Hour)) {
		t.Fatalf("the grace did not start over: %+v", c)
	}

	if a := connector.RouteApproval(conds, []proxyset.Device{{ID: "7"}}, now, grace, false); a.Condition != nil {
		t.Fatalf("no routes advertised: %+v", a.Condition)
	}
	if conds := connector.SetApproval(conds, connector.Approval{}); len(conds) != 0 {
		t.Fatalf("condition left: %+v", conds)
	}
}

// On Headscale the message names the command that approves the routes,
// with every route the device advertises (the command replaces the
// approved set), not Tailscale's admin console.
func TestUnapprovedRoutesOnHeadscale(t *testing.T) {
	devices := []proxyset.Device{{ID: "7", FQDN: "sr-0.hs.test", AdvertisedRoutes: []string{"10.0.0.0/8", "10.1.0.0/16"}, ApprovedRoutes: []string{"10.1.0.0/16"}}}
	msg := connector.UnapprovedRoutes(devices, true)
	if !strings.Contains(msg, "`headscale nodes approve-routes --identifier 7 --routes 10.0.0.0/8,10.1.0.0/16` (sr-0)") || strings.Contains(msg, "admin console") {
		t.Fatal(msg)
	}
	if msg := connector.UnapprovedRoutes(devices, false); !strings.Contains(msg, "admin console") || strings.Contains(msg, "headscale") {
		t.Fatal(msg)
	}
}
