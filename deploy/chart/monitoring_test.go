package chart_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/tailplane/tailplane/deploy/chart"
)

var monitoringObjects = []string{"PodMonitor/tailplane-operator", "PodMonitor/tailplane-proxies", "PrometheusRule/tailplane", "ConfigMap/tailplane-dashboard"}

// Monitoring is off by default; each value turns on its objects only.
func TestRenderMonitoringOff(t *testing.T) {
	objs := render(t, seedValues(t))
	for _, name := range monitoringObjects {
		if objs[name] != nil {
			t.Errorf("default values render %s", name)
		}
	}
	objs = render(t, seedValues(t, "monitoring.prometheusRule.enabled=true"))
	if objs["PrometheusRule/tailplane"] == nil || objs["PodMonitor/tailplane-proxies"] != nil || objs["ConfigMap/tailplane-dashboard"] != nil {
		t.Error("monitoring.prometheusRule.enabled=true alone renders other monitoring objects, or not the rule")
	}
}

func TestRenderMonitoring(t *testing.T) {
	objs := render(t, seedValues(t, "monitoring.podMonitor.enabled=true", "monitoring.podMonitor.labels.release=prom",
		"monitoring.podMonitor.interval=15s", "monitoring.prometheusRule.enabled=true", "monitoring.dashboard.enabled=true",
		"monitoring.dashboard.namespace=grafana"))
	for _, name := range monitoringObjects {
		if objs[name] == nil {
			t.Fatalf("no %s", name)
		}
	}
	proxies := objs["PodMonitor/tailplane-proxies"]
	if proxies.GetLabels()["release"] != "prom" {
		t.Errorf("PodMonitor labels %v", proxies.GetLabels())
	}
	sel, _, _ := unstructured.NestedStringMap(proxies.Object, "spec", "selector", "matchLabels")
	if !reflect.DeepEqual(sel, map[string]string{"tailscale.com/managed": "true"}) {
		t.Errorf("proxies selector %v", sel)
	}
	exprs, _, _ := unstructured.NestedSlice(proxies.Object, "spec", "selector", "matchExpressions")
	if fmt.Sprint(exprs) != "[map[key:tailscale.com/parent-resource-type operator:NotIn values:[nameserver]]]" {
		t.Errorf("proxies selector does not leave out the nameserver: %v", exprs)
	}
	eps, _, _ := unstructured.NestedSlice(proxies.Object, "spec", "podMetricsEndpoints")
	if len(eps) != 1 || fmt.Sprint(eps[0].(map[string]any)["targetPort"]) != "9002" || eps[0].(map[string]any)["interval"] != "15s" {
		t.Errorf("proxies endpoints %v", eps)
	}
	opEps, _, _ := unstructured.NestedSlice(objs["PodMonitor/tailplane-operator"].Object, "spec", "podMetricsEndpoints")
	if len(opEps) != 1 || opEps[0].(map[string]any)["port"] != "metrics" {
		t.Errorf("operator endpoints %v", opEps)
	}

	// The PrometheusRule holds exactly the groups of alerts.yaml.
	raw, err := os.ReadFile("tailplane-operator/files/monitoring/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var file map[string]any
	if err := yaml.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	groups, _, _ := unstructured.NestedSlice(objs["PrometheusRule/tailplane"].Object, "spec", "groups")
	if !reflect.DeepEqual(groups, file["groups"]) {
		t.Errorf("PrometheusRule groups differ from alerts.yaml")
	}
	var alerts []string
	for _, r := range groups[0].(map[string]any)["rules"].([]any) {
		alerts = append(alerts, r.(map[string]any)["alert"].(string))
	}
	if want := []string{"TailplaneDeviceOffline", "TailplaneCertificateExpiringSoon", "TailplaneCertificateRenewalFailing",
		"TailplanePluginFailing", "TailplaneProxyGroupDegraded", "TailplaneReconcileErrors", "TailplaneTailnetAPIUnauthorized"}; !reflect.DeepEqual(alerts, want) {
		t.Errorf("alerts %v, want %v", alerts, want)
	}

	// The dashboard: the sidecar's label, valid JSON, every panel with a query.
	cm := objs["ConfigMap/tailplane-dashboard"]
	if cm.GetLabels()["grafana_dashboard"] != "1" || cm.GetNamespace() != "grafana" {
		t.Errorf("dashboard ConfigMap labels %v, namespace %q", cm.GetLabels(), cm.GetNamespace())
	}
	data, _, _ := unstructured.NestedString(cm.Object, "data", "tailplane.json")
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal([]byte(data), &dash); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	if len(dash.Panels) < 10 {
		t.Errorf("%d panels", len(dash.Panels))
	}
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 || strings.TrimSpace(p.Targets[0].Expr) == "" {
			t.Errorf("panel %q has no query", p.Title)
		}
	}
}

func TestBadMonitoringValuesRejected(t *testing.T) {
	for _, set := range []string{"monitoring.podMonitor.enable=true", "monitoring.podMonitor.interval=soon", "monitoring.dashboard.enabled=yes"} {
		if _, err := chart.Render(context.Background(), chart.Namespace, seedValues(t, set)); err == nil {
			t.Errorf("--set %s rendered", set)
		}
	}
}
