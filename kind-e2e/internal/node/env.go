package node

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// fieldValue resolves a downward-API field path for pod.
func fieldValue(pod *corev1.Pod, podIP, path string) (string, error) {
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.podIP", "status.podIPs":
		return podIP, nil
	case "status.hostIP", "status.hostIPs":
		return NodeIP, nil
	case "metadata.labels", "metadata.annotations":
		m := pod.Labels
		if path == "metadata.annotations" {
			m = pod.Annotations
		}
		var lines []string
		for k, v := range m {
			lines = append(lines, k+"="+strconv.Quote(v))
		}
		return strings.Join(lines, "\n"), nil
	}
	if key, ok := strings.CutPrefix(path, "metadata.labels['"); ok {
		return pod.Labels[strings.TrimSuffix(key, "']")], nil
	}
	if key, ok := strings.CutPrefix(path, "metadata.annotations['"); ok {
		return pod.Annotations[strings.TrimSuffix(key, "']")], nil
	}
	return "", fmt.Errorf("field path %q is not supported by devcluster", path)
}

// containerEnv builds the environment of one container: the in-cluster
// apiserver address, then envFrom, then env (later wins, as in Kubernetes).
func containerEnv(ctx context.Context, client kubernetes.Interface, pod *corev1.Pod, c *corev1.Container, podIP, apiHost, apiPort string) ([]string, error) {
	vars := map[string]string{
		"PATH":                          "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOSTNAME":                      pod.Name,
		"KUBERNETES_SERVICE_HOST":       apiHost,
		"KUBERNETES_SERVICE_PORT":       apiPort,
		"KUBERNETES_SERVICE_PORT_HTTPS": apiPort,
	}
	order := []string{"PATH", "HOSTNAME", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "KUBERNETES_SERVICE_PORT_HTTPS"}
	set := func(k, v string) {
		if _, ok := vars[k]; !ok {
			order = append(order, k)
		}
		vars[k] = v
	}
	ns := pod.Namespace
	for _, from := range c.EnvFrom {
		switch {
		case from.ConfigMapRef != nil:
			cm, err := client.CoreV1().ConfigMaps(ns).Get(ctx, from.ConfigMapRef.Name, metav1.GetOptions{})
			if err != nil {
				if isOptional(from.ConfigMapRef.Optional) {
					continue
				}
				return nil, fmt.Errorf("envFrom configmap %s: %w", from.ConfigMapRef.Name, err)
			}
			for k, v := range cm.Data {
				set(from.Prefix+k, v)
			}
		case from.SecretRef != nil:
			s, err := client.CoreV1().Secrets(ns).Get(ctx, from.SecretRef.Name, metav1.GetOptions{})
			if err != nil {
				if isOptional(from.SecretRef.Optional) {
					continue
				}
				return nil, fmt.Errorf("envFrom secret %s: %w", from.SecretRef.Name, err)
			}
			for k, v := range s.Data {
				set(from.Prefix+k, string(v))
			}
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			set(e.Name, expand(e.Value, vars))
			continue
		}
		v, skip, err := valueFrom(ctx, client, pod, podIP, e.ValueFrom)
		if err != nil {
			return nil, fmt.Errorf("env %s: %w", e.Name, err)
		}
		if !skip {
			set(e.Name, v)
		}
	}
	out := make([]string, 0, len(order))
	for _, k := range order {
		out = append(out, k+"="+vars[k])
	}
	return out, nil
}

func valueFrom(ctx context.Context, client kubernetes.Interface, pod *corev1.Pod, podIP string, src *corev1.EnvVarSource) (value string, skip bool, err error) {
	switch {
	case src.FieldRef != nil:
		v, err := fieldValue(pod, podIP, src.FieldRef.FieldPath)
		return v, false, err
	case src.SecretKeyRef != nil:
		ref := src.SecretKeyRef
		s, err := client.CoreV1().Secrets(pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			return "", isOptional(ref.Optional), fmt.Errorf("secret %s: %w", ref.Name, err)
		}
		b, ok := s.Data[ref.Key]
		if !ok {
			return "", isOptional(ref.Optional), fmt.Errorf("secret %s has no key %q", ref.Name, ref.Key)
		}
		return string(b), false, nil
	case src.ConfigMapKeyRef != nil:
		ref := src.ConfigMapKeyRef
		cm, err := client.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			return "", isOptional(ref.Optional), fmt.Errorf("configmap %s: %w", ref.Name, err)
		}
		v, ok := cm.Data[ref.Key]
		if !ok {
			return "", isOptional(ref.Optional), fmt.Errorf("configmap %s has no key %q", ref.Name, ref.Key)
		}
		return v, false, nil
	case src.ResourceFieldRef != nil:
		// No resource accounting on a process node: report "0" (unlimited).
		return "0", false, nil
	}
	return "", false, fmt.Errorf("unsupported valueFrom")
}

// isOptional treats an error as "skip the variable" when the ref is optional.
func isOptional(b *bool) bool { return b != nil && *b }

// expand replaces $(VAR) with earlier variables, as the kubelet does.
func expand(s string, vars map[string]string) string {
	if !strings.Contains(s, "$(") {
		return s
	}
	var b strings.Builder
	for {
		i := strings.Index(s, "$(")
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		j := strings.Index(s[i:], ")")
		if j < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		name := s[i+2 : i+j]
		if v, ok := vars[name]; ok {
			b.WriteString(v)
		} else {
			b.WriteString(s[i : i+j+1])
		}
		s = s[i+j+1:]
	}
}
