package source_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tailplane/tailplane/internal/testenv"
	"github.com/tailplane/tailplane/plugins/source"
)

var env = testenv.New()

func TestMain(m *testing.M) { os.Exit(env.Run(m)) }

func gz(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Modules come from a ConfigMap (binaryData or data) or a Secret, plain or
// gzip, and the sha256 pin is checked on the decompressed module.
func TestFetchFromConfigMapAndSecret(t *testing.T) {
	ctx := context.Background()
	kube := env.Clientset(t)
	ns := env.Namespace(t)
	module := append([]byte("\x00asm\x01\x00\x00\x00"), bytes.Repeat([]byte{0}, 900<<10)...) // compresses well
	_, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "plugins"},
		BinaryData: map[string][]byte{"canary.wasm.gz": gz(t, module)},
		Data:       map[string]string{"tiny.wasm": "\x00asm\x01\x00\x00\x00"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "plugins"},
		Data:       map[string][]byte{"canary.wasm": module},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	got, digest, err := source.Fetch(ctx, kube, source.Ref{Kind: source.ConfigMap, Namespace: ns, Name: "plugins", Key: "canary.wasm.gz"})
	if err != nil || !bytes.Equal(got, module) {
		t.Fatalf("gzip from ConfigMap: %d bytes, %v", len(got), err)
	}
	got, _, err = source.Fetch(ctx, kube, source.Ref{Kind: source.Secret, Namespace: ns, Name: "plugins", Key: "canary.wasm", SHA256: strings.ToUpper(digest)})
	if err != nil || !bytes.Equal(got, module) {
		t.Fatalf("pinned module from Secret: %d bytes, %v", len(got), err)
	}
	if got, _, err := source.Fetch(ctx, kube, source.Ref{Kind: source.ConfigMap, Namespace: ns, Name: "plugins", Key: "tiny.wasm"}); err != nil || len(got) != 8 {
		t.Fatalf("ConfigMap data key: %q, %v", got, err)
	}

	bad := []struct {
		name string
		ref  source.Ref
		err  error
	}{
		{"sha256 mismatch", source.Ref{Kind: source.ConfigMap, Namespace: ns, Name: "plugins", Key: "canary.wasm.gz", SHA256: strings.Repeat("0", 64)}, source.ErrSHA256Mismatch},
		{"missing key", source.Ref{Kind: source.Secret, Namespace: ns, Name: "plugins", Key: "nope.wasm"}, source.ErrNotFound},
		{"missing object", source.Ref{Kind: source.ConfigMap, Namespace: ns, Name: "absent", Key: "x"}, source.ErrNotFound},
	}
	for _, c := range bad {
		if _, _, err := source.Fetch(ctx, kube, c.ref); !errors.Is(err, c.err) || !strings.Contains(err.Error(), c.ref.Key) {
			t.Errorf("%s: %v, want %v naming the key", c.name, err, c.err)
		}
	}
	if _, _, err := source.Fetch(ctx, kube, source.Ref{Kind: "Pod", Namespace: ns, Name: "x", Key: "y"}); err == nil {
		t.Error("an unknown kind was accepted")
	}
}

// Decompression is bounded and corrupt gzip is refused.
func TestDecodeRefusesBombsAndCorruptGzip(t *testing.T) {
	bomb := gz(t, make([]byte, source.MaxModuleSize+1))
	if _, _, err := source.Decode(bomb, source.Ref{Key: "bomb"}); !errors.Is(err, source.ErrTooLarge) {
		t.Errorf("gzip bomb: %v", err)
	}
	if _, _, err := source.Decode([]byte{0x1f, 0x8b, 0, 1, 2}, source.Ref{Key: "bad"}); !errors.Is(err, source.ErrBadGzip) {
		t.Errorf("corrupt gzip: %v", err)
	}
}
