// Package source fetches a plugin's WebAssembly module from the Kubernetes
// object a RoutingPlugin names: a ConfigMap key (binaryData, or data) or a
// Secret key, or the key of several Secrets read in order (the operator's
// content-addressed copy of a module of any size, split into Secrets of
// less than 1 MiB). The bytes may be gzip-compressed (a Go guest is ~2-4 MB
// and a ConfigMap holds 1 MiB); the sha256 pin is checked on the
// decompressed module, so the same pin holds whether or not it was
// compressed.
//
// It may import client-go and the standard library; nothing of ours.
package source

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// MaxModuleSize bounds a decompressed module, so a gzip bomb cannot
// exhaust the proxy's memory.
const MaxModuleSize = 64 << 20

// Kinds of object a module can come from.
const (
	ConfigMap = "ConfigMap"
	Secret    = "Secret"
)

// Errors, wrapped with the object and key; test with errors.Is.
var (
	// ErrNotFound: the object or the key does not exist.
	ErrNotFound = errors.New("module source not found")
	// ErrSHA256Mismatch: the module's digest differs from the pin.
	ErrSHA256Mismatch = errors.New("sha256 mismatch")
	// ErrTooLarge: the module (decompressed) exceeds MaxModuleSize.
	ErrTooLarge = errors.New("module too large")
	// ErrBadGzip: the bytes start like gzip but do not decompress.
	ErrBadGzip = errors.New("corrupt gzip")
)

// Ref names where a module lives.
type Ref struct {
	// Kind is ConfigMap or Secret.
	Kind string
	// Namespace, Name and Key locate the bytes.
	Namespace, Name, Key string
	// SHA256, when set, is the hex digest the decompressed module must have.
	SHA256 string
	// Chunks, when set (Kind Secret), are the Secrets whose Key values,
	// concatenated in this order, are the module; Name is then Chunks[0].
	Chunks []string
	// MaxSize bounds the decompressed module; 0 means MaxModuleSize.
	MaxSize int64
}

func (r Ref) maxSize() int64 {
	if r.MaxSize > 0 {
		return r.MaxSize
	}
	return MaxModuleSize
}

func (r Ref) String() string {
	if len(r.Chunks) > 1 {
		return fmt.Sprintf("%s %s/%s (and %d more) key %q", r.Kind, r.Namespace, r.Chunks[0], len(r.Chunks)-1, r.Key)
	}
	return fmt.Sprintf("%s %s/%s key %q", r.Kind, r.Namespace, r.Name, r.Key)
}

// Fetch reads the module ref names, decompresses it if it is gzip and
// verifies its sha256. It returns the module and its hex sha256.
func Fetch(ctx context.Context, kube kubernetes.Interface, ref Ref) ([]byte, string, error) {
	raw, err := read(ctx, kube, ref)
	if err != nil {
		return nil, "", err
	}
	return Decode(raw, ref)
}

// Decode decompresses raw if it is gzip and verifies ref.SHA256; Fetch's
// second half, for modules that arrive another way.
func Decode(raw []byte, ref Ref) ([]byte, string, error) {
	module := raw
	if bytes.HasPrefix(raw, []byte{0x1f, 0x8b}) {
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return nil, "", fmt.Errorf("%s: %w: %v", ref, ErrBadGzip, err)
		}
		module, err = io.ReadAll(io.LimitReader(zr, ref.maxSize()+1))
		if err != nil {
			return nil, "", fmt.Errorf("%s: %w: %v", ref, ErrBadGzip, err)
		}
	}
	if int64(len(module)) > ref.maxSize() {
		return nil, "", fmt.Errorf("%s: %w: more than %d bytes", ref, ErrTooLarge, ref.maxSize())
	}
	sum := sha256.Sum256(module)
	digest := hex.EncodeToString(sum[:])
	if ref.SHA256 != "" && !strings.EqualFold(ref.SHA256, digest) {
		return nil, "", fmt.Errorf("%s: %w: module has sha256 %s, the pin is %s", ref, ErrSHA256Mismatch, digest, strings.ToLower(ref.SHA256))
	}
	return module, digest, nil
}

func read(ctx context.Context, kube kubernetes.Interface, ref Ref) ([]byte, error) {
	switch ref.Kind {
	case ConfigMap:
		cm, err := kube.CoreV1().ConfigMaps(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			return nil, notFound(ref, err)
		}
		if b, ok := cm.BinaryData[ref.Key]; ok {
			return b, nil
		}
		if s, ok := cm.Data[ref.Key]; ok {
			return []byte(s), nil
		}
	case Secret:
		if len(ref.Chunks) > 0 {
			return readChunks(ctx, kube, ref)
		}
		s, err := kube.CoreV1().Secrets(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			return nil, notFound(ref, err)
		}
		if b, ok := s.Data[ref.Key]; ok {
			return b, nil
		}
	default:
		return nil, fmt.Errorf("module source kind %q: want %s or %s", ref.Kind, ConfigMap, Secret)
	}
	return nil, fmt.Errorf("%s: %w: the key does not exist", ref, ErrNotFound)
}

// readChunks concatenates the Key of every Secret of ref.Chunks.
func readChunks(ctx context.Context, kube kubernetes.Interface, ref Ref) ([]byte, error) {
	var out []byte
	for _, name := range ref.Chunks {
		s, err := kube.CoreV1().Secrets(ref.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, notFound(ref, err)
		}
		b, ok := s.Data[ref.Key]
		if !ok {
			return nil, fmt.Errorf("%s: %w: Secret %s has no key %q", ref, ErrNotFound, name, ref.Key)
		}
		out = append(out, b...)
	}
	return out, nil
}

func notFound(ref Ref, err error) error {
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%s: %w: %v", ref, ErrNotFound, err)
	}
	return fmt.Errorf("read %s: %w", ref, err)
}
