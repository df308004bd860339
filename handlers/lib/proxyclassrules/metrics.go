package proxyclassrules

import (
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/tailplane/tailplane/crds/tailscale/v1alpha1"
	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/internal/proxystate"
)

// Labels of a proxy's metrics Service and ServiceMonitor, the official
// operator's: Prometheus turns them into the job and target labels.
const (
	LabelMetricsTarget   = "tailscale.com/metrics-target"
	LabelPromProxyType   = "ts_proxy_type"
	LabelPromParentName  = "ts_proxy_parent_name"
	LabelPromParentNS    = "ts_proxy_parent_namespace"
	LabelPromJob         = "ts_prom_job"
	metricsServiceSuffix = "-metrics"
)

// ServiceMonitorResource is the Prometheus Operator's ServiceMonitor.
var ServiceMonitorResource = schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "servicemonitors"}

// MetricsWanted reports whether pc asks for a metrics endpoint on a proxy of
// kind (never on egress proxies, as in the official operator).
func MetricsWanted(pc *v1alpha1.ProxyClass, kind ProxyKind) bool {
	return pc != nil && pc.Spec.Metrics != nil && pc.Spec.Metrics.Enable && kind != Egress
}

// ServiceMonitorWanted reports whether pc also asks for a ServiceMonitor.
func ServiceMonitorWanted(pc *v1alpha1.ProxyClass, kind ProxyKind) bool {
	return MetricsWanted(pc, kind) && pc.Spec.Metrics.ServiceMonitor != nil && pc.Spec.Metrics.ServiceMonitor.Enable
}

// MetricsServiceName is the name of the metrics Service of the proxy whose
// StatefulSet is named base.
func MetricsServiceName(base string) string { return base + metricsServiceSuffix }

// promProxyType is the ts_proxy_type value of a parent type.
func promProxyType(parentType string) string {
	switch parentType {
	case "svc":
		return "ingress_service"
	case "ingress":
		return "ingress_resource"
	}
	return parentType
}

// metricsLabels are the labels of the metrics Service and ServiceMonitor:
// the proxy's child labels (so deleting the proxy deletes them) plus the
// official operator's Prometheus labels.
func metricsLabels(sts *appsv1.StatefulSet) map[string]string {
	l := map[string]string{}
	for _, k := range []string{proxystate.LabelManaged, proxystate.LabelParentType, proxystate.LabelParentName, proxystate.LabelParentNamespace} {
		if v, ok := sts.Labels[k]; ok {
			l[k] = v
		}
	}
	typ := promProxyType(l[proxystate.LabelParentType])
	name, ns := l[proxystate.LabelParentName], l[proxystate.LabelParentNamespace]
	job := "ts_" + typ + "_" + name
	if ns != "" {
		job = "ts_" + typ + "_" + ns + "_" + name
	}
	l[LabelMetricsTarget] = sts.Name
	l[LabelPromProxyType] = typ
	l[LabelPromParentName] = name
	l[LabelPromParentNS] = ns
	l[LabelPromJob] = proxyset.TruncateLabelValue(job)
	return l
}

// MetricsService is the ClusterIP Service in front of the metrics port of
// the proxy run by sts: `<sts>-metrics`, port "metrics", selecting the
// proxy's Pod.
func MetricsService(sts *appsv1.StatefulSet) *corev1.Service {
	return &corev1.Service{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{
			Name: MetricsServiceName(sts.Name), Namespace: sts.Namespace, Labels: metricsLabels(sts),
		},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: maps.Clone(sts.Spec.Selector.MatchLabels),
			Ports: []corev1.ServicePort{{
				Name: "metrics", Protocol: corev1.ProtocolTCP, Port: MetricsPort, TargetPort: intstr.FromString("metrics"),
			}},
		},
	}
}

// ServiceMonitor is the Prometheus Operator ServiceMonitor scraping svc (a
// MetricsService, which owns it), with the ProxyClass's extra labels.
func ServiceMonitor(svc *corev1.Service, pc *v1alpha1.ProxyClass) *unstructured.Unstructured {
	var extra map[string]string
	if sm := pc.Spec.Metrics.ServiceMonitor; sm != nil {
		extra = sm.Labels.Strings()
	}
	labels, matchLabels := unstructuredMap(extra, svc.Labels), unstructuredMap(svc.Labels)
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "monitoring.coreos.com/v1",
		"kind":       "ServiceMonitor",
		"metadata": map[string]any{
			"name":      svc.Name,
			"namespace": svc.Namespace,
			"labels":    labels,
			"ownerReferences": []any{map[string]any{
				"apiVersion": "v1", "kind": "Service", "name": svc.Name, "uid": string(svc.UID),
			}},
		},
		"spec": map[string]any{
			"jobLabel":          LabelPromJob,
			"targetLabels":      []any{LabelPromParentName, LabelPromParentNS, LabelPromProxyType},
			"namespaceSelector": map[string]any{"matchNames": []any{svc.Namespace}},
			"selector":          map[string]any{"matchLabels": matchLabels},
			"endpoints":         []any{map[string]any{"port": "metrics"}},
		},
	}}
}

// unstructuredMap merges ms (later maps win) into the map[string]any an
// unstructured object holds.
func unstructuredMap(ms ...map[string]string) map[string]any {
	out := map[string]any{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}
