package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// volumeWriter fills a pod's volume folders from the API. Each volume is a
// folder on the host, bind-mounted at its mountPaths inside the container's
// mount namespace.
type volumeWriter struct {
	client kubernetes.Interface
	pod    *corev1.Pod
	podIP  string
	root   string // pods/<uid>/volumes
}

// volumePath is the host folder of a volume.
func (w *volumeWriter) volumePath(name string) string { return filepath.Join(w.root, name) }

// writeAll (re)writes every volume. emptyDir folders are created once and
// never cleared while the pod lives.
func (w *volumeWriter) writeAll(ctx context.Context) error {
	for _, v := range w.pod.Spec.Volumes {
		dir := w.volumePath(v.Name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		files, err := w.files(ctx, v)
		if err != nil {
			return fmt.Errorf("volume %q: %w", v.Name, err)
		}
		if files == nil {
			continue
		}
		if err := writeFiles(dir, files); err != nil {
			return fmt.Errorf("volume %q: %w", v.Name, err)
		}
	}
	return nil
}

// files returns the content of a volume, or nil for folder-only volumes
// (emptyDir, hostPath-like) that keep what the container writes.
func (w *volumeWriter) files(ctx context.Context, v corev1.Volume) (map[string][]byte, error) {
	ns := w.pod.Namespace
	switch {
	case v.EmptyDir != nil:
		return nil, nil
	case v.Secret != nil:
		return w.secretFiles(ctx, ns, v.Secret.SecretName, v.Secret.Items, v.Secret.Optional)
	case v.ConfigMap != nil:
		return w.configMapFiles(ctx, ns, v.ConfigMap.Name, v.ConfigMap.Items, v.ConfigMap.Optional)
	case v.DownwardAPI != nil:
		return w.downwardFiles(v.DownwardAPI.Items)
	case v.Projected != nil:
		out := map[string][]byte{}
		for _, src := range v.Projected.Sources {
			var part map[string][]byte
			var err error
			switch {
			case src.Secret != nil:
				part, err = w.secretFiles(ctx, ns, src.Secret.Name, src.Secret.Items, src.Secret.Optional)
			case src.ConfigMap != nil:
				part, err = w.configMapFiles(ctx, ns, src.ConfigMap.Name, src.ConfigMap.Items, src.ConfigMap.Optional)
			case src.DownwardAPI != nil:
				part, err = w.downwardFiles(src.DownwardAPI.Items)
			case src.ServiceAccountToken != nil:
				part, err = w.tokenFile(ctx, src.ServiceAccountToken)
			default:
				err = fmt.Errorf("unsupported projected source (devcluster supports secret, configMap, downwardAPI, serviceAccountToken)")
			}
			if err != nil {
				return nil, err
			}
			for k, b := range part {
				out[k] = b
			}
		}
		return out, nil
	default:
		return nil, fmt.Errorf("unsupported volume type (devcluster supports secret, configMap, projected, downwardAPI, emptyDir)")
	}
}

func (w *volumeWriter) secretFiles(ctx context.Context, ns, name string, items []corev1.KeyToPath, optional *bool) (map[string][]byte, error) {
	s, err := w.client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		if optional != nil && *optional {
			return map[string][]byte{}, nil
		}
		return nil, fmt.Errorf("secret %s/%s: %w", ns, name, err)
	}
	return pick(s.Data, items)
}

func (w *volumeWriter) configMapFiles(ctx context.Context, ns, name string, items []corev1.KeyToPath, optional *bool) (map[string][]byte, error) {
	cm, err := w.client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		if optional != nil && *optional {
			return map[string][]byte{}, nil
		}
		return nil, fmt.Errorf("configmap %s/%s: %w", ns, name, err)
	}
	data := map[string][]byte{}
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		data[k] = v
	}
	return pick(data, items)
}

func pick(data map[string][]byte, items []corev1.KeyToPath) (map[string][]byte, error) {
	if len(items) == 0 {
		return data, nil
	}
	out := map[string][]byte{}
	for _, it := range items {
		b, ok := data[it.Key]
		if !ok {
			return nil, fmt.Errorf("key %q not found", it.Key)
		}
		out[it.Path] = b
	}
	return out, nil
}

func (w *volumeWriter) downwardFiles(items []corev1.DownwardAPIVolumeFile) (map[string][]byte, error) {
	out := map[string][]byte{}
	for _, it := range items {
		if it.FieldRef == nil {
			return nil, fmt.Errorf("downwardAPI %q: only fieldRef is supported", it.Path)
		}
		v, err := fieldValue(w.pod, w.podIP, it.FieldRef.FieldPath)
		if err != nil {
			return nil, err
		}
		out[it.Path] = []byte(v)
	}
	return out, nil
}

func (w *volumeWriter) tokenFile(ctx context.Context, src *corev1.ServiceAccountTokenProjection) (map[string][]byte, error) {
	exp := int64(3600)
	if src.ExpirationSeconds != nil {
		exp = *src.ExpirationSeconds
	}
	var aud []string
	if src.Audience != "" {
		aud = []string{src.Audience}
	}
	sa := w.pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	tr, err := w.client.CoreV1().ServiceAccounts(w.pod.Namespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{
			Audiences:         aud,
			ExpirationSeconds: &exp,
			BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: w.pod.Name, UID: w.pod.UID},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("token for service account %s/%s: %w", w.pod.Namespace, sa, err)
	}
	return map[string][]byte{src.Path: []byte(tr.Status.Token)}, nil
}

// writeFiles writes each file by rename, so that a process reading through a
// bind mount of dir never sees a half-written file.
func writeFiles(dir string, files map[string][]byte) error {
	for rel, b := range files {
		if strings.Contains(rel, "..") || filepath.IsAbs(rel) {
			return fmt.Errorf("path %q leaves the volume", rel)
		}
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		tmp := p + ".tmp"
		if err := os.WriteFile(tmp, b, 0o644); err != nil {
			return err
		}
		if err := os.Rename(tmp, p); err != nil {
			return err
		}
	}
	return nil
}
