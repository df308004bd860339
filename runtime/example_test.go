package runtime_test

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/tailplane/tailplane/runtime"
)

// Register a handler for new ConfigMaps labelled example.com/greet=yes; it
// annotates each one through the cycle's single merged patch.
func Example() {
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(env.Dir(), "kubeconfig"))
	if err != nil {
		panic(err)
	}
	op, err := runtime.New(cfg, runtime.Settings{
		HealthAddress:  "-", // no listeners in an example
		MetricsAddress: "-",
		Logger:         runtime.NewLogger(io.Discard, false),
	})
	if err != nil {
		panic(err)
	}
	configmaps := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	op.OnCreate(configmaps, "greet", func(ctx context.Context, ev *runtime.Event) (any, error) {
		ev.Patch.SetAnnotation("example.com/greeting", "hello "+ev.Object.GetName())
		return nil, nil
	}, runtime.Label("example.com/greet", "yes"))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = op.Run(ctx) }()

	kube := kubernetes.NewForConfigOrDie(cfg)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: "world", Namespace: "default", Labels: map[string]string{"example.com/greet": "yes"},
	}}
	if _, err := kube.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		panic(err)
	}
	defer func() {
		_ = kube.CoreV1().ConfigMaps("default").Delete(context.Background(), "world", metav1.DeleteOptions{})
	}()
	var greeting string
	_ = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := kube.CoreV1().ConfigMaps("default").Get(ctx, "world", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		greeting = got.Annotations["example.com/greeting"]
		return greeting != "", nil
	})
	fmt.Println(greeting)
	// Output: hello world
}
