package realnode

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/charmbracelet/log"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// recordsConfigMap (kube-system) holds the cluster's extra DNS names, the
// hosts-style file Config.RecordsFile, under recordsKey; CoreDNS mounts it
// and answers its names with the hosts plugin, as the process node's
// cluster DNS answers the same file's.
const (
	recordsConfigMap = "devcluster-dns-records"
	recordsKey       = "hosts"
)

// syncRecords keeps recordsConfigMap equal to the file at path (empty when
// there is none), reading it every second, until ctx ends. A failed write
// is logged and tried again on the next read.
func syncRecords(ctx context.Context, client kubernetes.Interface, path string, logger *log.Logger) {
	var written *string
	for {
		b, err := os.ReadFile(path)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			logger.Warn("cluster DNS records file", "file", path, "err", err)
		} else if text := string(b); written == nil || *written != text {
			if err := putRecords(ctx, client, text); err != nil {
				if ctx.Err() == nil {
					logger.Warn("cluster DNS records", "err", err)
				}
			} else {
				written = &text
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// putRecords creates or updates recordsConfigMap with text.
func putRecords(ctx context.Context, client kubernetes.Interface, text string) error {
	cms := client.CoreV1().ConfigMaps("kube-system")
	cur, err := cms.Get(ctx, recordsConfigMap, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = cms.Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: recordsConfigMap, Namespace: "kube-system"},
			Data:       map[string]string{recordsKey: text},
		}, metav1.CreateOptions{})
		return wrapRecords(err)
	}
	if err != nil {
		return wrapRecords(err)
	}
	if cur.Data[recordsKey] == text {
		return nil
	}
	cur.Data = map[string]string{recordsKey: text}
	_, err = cms.Update(ctx, cur, metav1.UpdateOptions{})
	return wrapRecords(err)
}

func wrapRecords(err error) error {
	if err != nil {
		return fmt.Errorf("ConfigMap kube-system/%s: %w", recordsConfigMap, err)
	}
	return nil
}
