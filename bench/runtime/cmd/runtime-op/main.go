// Command runtime-op is the benchmark's operator built on Tailplane's
// runtime: one handler for create, update and resume (as the operator's
// own handlers register, and as a reconciler runs on every change) that
// adds one annotation to each Widget. By default the runtime also posts an
// Event for each success; -quiet-success turns that off, as
// tailplane-operator does (controller-runtime posts none). It prints "ready" once its informer
// has synced.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/charmbracelet/log"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/tailplane/tailplane/runtime"
)

func main() {
	kubeconfig := flag.String("kube", "", "kubeconfig of the cluster")
	namespace := flag.String("namespace", "", "namespace to watch")
	group := flag.String("group", "", "API group of the Widget CRD")
	workers := flag.Int("workers", 4, "workers")
	quietSuccess := flag.Bool("quiet-success", false, "post Events for failures only (runtime.Settings.QuietSuccess), as tailplane-operator runs")
	flag.Parse()
	if err := run(*kubeconfig, *namespace, *group, *workers, *quietSuccess); err != nil {
		fmt.Fprintln(os.Stderr, "runtime-op:", err)
		os.Exit(1)
	}
}

func run(kubeconfig, namespace, group string, workers int, quietSuccess bool) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = -1, 0 // the same unthrottled client on both sides
	op, err := runtime.New(cfg, runtime.Settings{
		Workers: workers, HealthAddress: "-", MetricsAddress: "-", QuietSuccess: quietSuccess,
		Logger: quietLogger(),
	})
	if err != nil {
		return err
	}
	widgets := schema.GroupVersionResource{Group: group, Version: "v1", Resource: "widgets"}
	op.On(widgets, "annotate", func(_ context.Context, ev *runtime.Event) (any, error) {
		ev.Patch.SetAnnotation("bench.tailplane.io/handled", "1")
		return nil, nil
	}, runtime.Namespace(namespace), runtime.Causes(runtime.CauseCreate, runtime.CauseUpdate, runtime.CauseResume))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() {
		for !op.Ready() && ctx.Err() == nil {
			time.Sleep(10 * time.Millisecond)
		}
		fmt.Println("ready")
	}()
	return op.Run(ctx)
}

// quietLogger logs warnings and errors to stderr, as crt-op's defaults do.
func quietLogger() *log.Logger {
	l := runtime.NewLogger(os.Stderr, false)
	l.SetLevel(log.WarnLevel)
	return l
}
