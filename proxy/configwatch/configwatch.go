// Package configwatch delivers the raw bytes of the proxy's config document
// whenever they change: from one Secret watched through the Kubernetes API
// (a client-go informer restricted to that Secret by name), or from a file
// polled on disk for local runs.
//
// It imports client-go, charmbracelet/log and the standard library; it does
// not parse the document.
package configwatch

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"time"

	"github.com/charmbracelet/log"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Source calls onChange with the document each time it changes (and once
// at start when it exists) until ctx is done. Calls are sequential.
type Source interface {
	Run(ctx context.Context, onChange func(data []byte)) error
}

// Secret watches key in the Secret namespace/name.
type Secret struct {
	Client    kubernetes.Interface
	Namespace string
	Name      string
	Key       string
	Log       *log.Logger
}

// Run implements Source. A missing Secret or key is logged and waited for.
func (s *Secret) Run(ctx context.Context, onChange func([]byte)) error {
	factory := informers.NewSharedInformerFactoryWithOptions(s.Client, 0,
		informers.WithNamespace(s.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", s.Name).String()
		}))
	inf := factory.Core().V1().Secrets().Informer()
	changes := make(chan []byte, 1)
	deliver := func(obj any) {
		sec, ok := obj.(*corev1.Secret)
		if !ok {
			return
		}
		data, ok := sec.Data[s.Key]
		if !ok {
			s.Log.Warn("config Secret has no config key", "secret", s.Namespace+"/"+s.Name, "key", s.Key)
			return
		}
		// Keep only the newest document if the consumer is slow.
		select {
		case <-changes:
		default:
		}
		changes <- data
	}
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    deliver,
		UpdateFunc: func(_, obj any) { deliver(obj) },
		DeleteFunc: func(any) {
			s.Log.Warn("config Secret deleted; keeping the current config", "secret", s.Namespace+"/"+s.Name)
		},
	})
	if err != nil {
		return fmt.Errorf("watch config Secret %s/%s: %w", s.Namespace, s.Name, err)
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	var last []byte
	for {
		select {
		case <-ctx.Done():
			return nil
		case data := <-changes:
			if last != nil && bytes.Equal(last, data) {
				continue // e.g. only the proxy's own status keys changed
			}
			last = data
			onChange(data)
		}
	}
}

// File polls a file's contents.
type File struct {
	Path string
	// Interval between polls; default 500ms.
	Interval time.Duration
	Log      *log.Logger
}

// Run implements Source.
func (f *File) Run(ctx context.Context, onChange func([]byte)) error {
	interval := f.Interval
	if interval == 0 {
		interval = 500 * time.Millisecond
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var last []byte
	warned := false
	for {
		data, err := os.ReadFile(f.Path)
		switch {
		case err == nil:
			warned = false
			if last == nil || !bytes.Equal(last, data) {
				last = data
				onChange(data)
			}
		case warned:
			// Said once already; say again only after a success.
		default:
			f.Log.Warn("cannot read config file; keeping the current config", "path", f.Path, "err", err)
			warned = true
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}
