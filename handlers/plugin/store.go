package plugin

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tailplane/tailplane/handlers/lib/resources"
	"github.com/tailplane/tailplane/internal/proxystate"
	"github.com/tailplane/tailplane/plugins/source"
)

// The operator's copy of a module: the gzip stream split into Secrets of
// chunkSize bytes (a Secret holds at most 1 MiB), named by the module's
// sha256 (ChunkNames). Chunk 0 is written last and carries the count, so
// its existence means the copy is complete. Copies are immutable: a digest
// names one content.
const (
	chunkSize = 768 << 10
	// LabelModule marks the chunk Secrets.
	LabelModule = "tailplane.dev/wasm-module"
	// AnnotationSHA256 and AnnotationChunks describe a copy on its chunk 0
	// (every chunk has the digest).
	AnnotationSHA256 = "tailplane.dev/sha256"
	AnnotationChunks = "tailplane.dev/chunks"
)

// store makes sure the cluster holds the copy of mod (digest sum) and
// returns its number of chunks.
func (m *module) store(ctx context.Context, sum string, mod []byte) (int, error) {
	secrets := m.d.Kube.CoreV1().Secrets(m.d.Settings.Namespace)
	names := func(n int) []string { return ChunkNames(sum, n) }
	if s, err := secrets.Get(ctx, names(1)[0], metav1.GetOptions{}); err == nil {
		if n, err := strconv.Atoi(s.Annotations[AnnotationChunks]); err == nil && n > 0 && s.Annotations[AnnotationSHA256] == sum {
			return n, nil
		}
	} else if !apierrors.IsNotFound(err) {
		return 0, fmt.Errorf("read module copy %s: %w", sum, err)
	}
	var gz bytes.Buffer
	w, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	_, _ = w.Write(mod)
	_ = w.Close()
	data := gz.Bytes()
	n := (len(data) + chunkSize - 1) / chunkSize
	all := names(n)
	immutable := true
	for i := n - 1; i >= 0; i-- {
		part := data[i*chunkSize : min((i+1)*chunkSize, len(data))]
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: all[i], Namespace: m.d.Settings.Namespace,
				Labels:      map[string]string{proxystate.LabelManaged: "true", LabelModule: "true"},
				Annotations: map[string]string{AnnotationSHA256: sum}},
			Data:      map[string][]byte{ModuleKey: part},
			Immutable: &immutable,
		}
		if i == 0 {
			s.Annotations[AnnotationChunks] = strconv.Itoa(n)
		}
		if _, err := secrets.Create(ctx, s, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return 0, fmt.Errorf("store module copy %s (chunk %d of %d): %w", sum, i+1, n, err)
		}
	}
	return n, nil
}

// readCopy returns the module with digest sum from the cluster's copy, nil
// if there is no complete copy (or it does not verify: it is then fetched
// again).
func (m *module) readCopy(ctx context.Context, sum string, maxSize int64) ([]byte, error) {
	first, err := m.d.Kube.CoreV1().Secrets(m.d.Settings.Namespace).Get(ctx, ChunkNames(sum, 1)[0], metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read module copy %s: %w", sum, err)
	}
	n, err := strconv.Atoi(first.Annotations[AnnotationChunks])
	if err != nil || n < 1 {
		return nil, nil
	}
	ref := source.Ref{Kind: source.Secret, Namespace: m.d.Settings.Namespace, Key: ModuleKey, SHA256: sum,
		Chunks: ChunkNames(sum, n), MaxSize: maxSize}
	ref.Name = ref.Chunks[0]
	mod, _, err := source.Fetch(ctx, m.d.Kube, ref)
	if err != nil {
		m.d.Log.Warn("the cluster's module copy does not verify; fetching it again", "sha256", sum, "err", err)
		return nil, nil
	}
	return mod, nil
}

// collect deletes the module copies no RoutingPlugin serves any more, and
// the per-plugin copies of earlier versions. It runs with copyMu held, so
// it never sees a copy stored but not yet in its plugin's status.
func (m *module) collect(ctx context.Context) {
	m.copyMu.Lock()
	defer m.copyMu.Unlock()
	list, err := m.d.Dyn.Resource(resources.RoutingPlugins).Namespace(m.d.WatchNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		m.d.Log.Warn("list RoutingPlugins to collect module copies", "err", err)
		return
	}
	used := map[string]bool{}
	for i := range list.Items {
		if rp, err := Decode(&list.Items[i]); err == nil && rp.DeletionTimestamp == nil && rp.Status.SHA256 != "" {
			used[rp.Status.SHA256] = true
		}
	}
	secrets := m.d.Kube.CoreV1().Secrets(m.d.Settings.Namespace)
	copies, err := secrets.List(ctx, metav1.ListOptions{LabelSelector: LabelModule + "=true"})
	if err != nil {
		m.d.Log.Warn("list module copies", "err", err)
		return
	}
	legacy, err := secrets.List(ctx, metav1.ListOptions{LabelSelector: LabelPlugin})
	if err == nil {
		copies.Items = append(copies.Items, legacy.Items...)
	}
	for _, s := range copies.Items {
		if sum, ok := s.Annotations[AnnotationSHA256]; ok && used[sum] {
			continue
		}
		if err := secrets.Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			m.d.Log.Warn("delete an unused module copy", "secret", s.Name, "err", err)
		}
	}
}
