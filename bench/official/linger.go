package official

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// statefulSetSummary lists the StatefulSets in ns with their deletion
// state and finalizers: whether an operator started deleting a proxy it
// left behind.
func (e *Env) statefulSetSummary(ctx context.Context, ns string) string {
	list, err := e.Cluster.Kube.AppsV1().StatefulSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "StatefulSets: " + err.Error()
	}
	var parts []string
	for _, s := range list.Items {
		p := s.Name
		if s.DeletionTimestamp != nil {
			p += fmt.Sprintf(" deleting for %s", time.Since(s.DeletionTimestamp.Time).Round(time.Second))
		}
		if len(s.Finalizers) > 0 {
			p += " finalizers " + strings.Join(s.Finalizers, ",")
		}
		parts = append(parts, p)
	}
	return "StatefulSets: " + strings.Join(parts, "; ")
}

// saveOperatorLog writes the last four minutes of side's operator log into
// the run's folder, for finding out why a proxy outlived its parent, and
// returns the file's name (or why there is none).
func (e *Env) saveOperatorLog(ctx context.Context, s Side, obj *unstructured.Unstructured) string {
	pods, err := e.Cluster.Kube.CoreV1().Pods(s.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	since := int64(240)
	for _, p := range pods.Items {
		if !strings.HasPrefix(p.Name, "operator-") || p.Status.Phase != corev1.PodRunning {
			continue
		}
		body, err := e.Cluster.Kube.CoreV1().Pods(s.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{SinceSeconds: &since}).DoRaw(ctx)
		if err != nil {
			return "logs of " + p.Name + ": " + err.Error()
		}
		file := filepath.Join(e.Cfg.Work, fmt.Sprintf("linger-%s-%s-%s-%s.log", s.Name, strings.ToLower(obj.GetKind()), obj.GetName(), time.Now().UTC().Format("150405")))
		if err := os.WriteFile(file, body, 0o644); err != nil {
			return err.Error()
		}
		return file
	}
	return "no running operator pod"
}
