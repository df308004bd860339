package runtime_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/tailplane/tailplane/runtime"
)

// ObjectKey is the informer caches' key: client-go's format, with the name
// alone for a cluster-scoped object. (Named TestMemory so that it runs
// without a control plane, as TestMain decides.)
func TestMemoryObjectKey(t *testing.T) {
	for _, tc := range []struct{ namespace, name, want string }{
		{"default", "web", "default/web"},
		{"", "tailscale", "tailscale"},
		{"kube-system", "a.b-c", "kube-system/a.b-c"},
	} {
		got := runtime.ObjectKey(tc.namespace, tc.name)
		if got != tc.want {
			t.Errorf("ObjectKey(%q, %q) = %q, want %q", tc.namespace, tc.name, got, tc.want)
		}
		if k := (runtime.Key{Namespace: tc.namespace, Name: tc.name}).ObjectKey(); k != got {
			t.Errorf("Key.ObjectKey() = %q, want %q", k, got)
		}
		client, err := cache.MetaNamespaceKeyFunc(&metav1.ObjectMeta{Namespace: tc.namespace, Name: tc.name})
		if err != nil || client != got {
			t.Errorf("cache.MetaNamespaceKeyFunc = %q (%v), ObjectKey %q", client, err, got)
		}
	}
}
