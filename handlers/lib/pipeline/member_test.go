package pipeline_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/tailplane/tailplane/handlers/lib/cluster"
	"github.com/tailplane/tailplane/handlers/lib/pipeline"
	"github.com/tailplane/tailplane/handlers/lib/settings"
	"github.com/tailplane/tailplane/internal/tailnet"
	"github.com/tailplane/tailplane/internal/tailnet/tailnettest"
	"github.com/tailplane/tailplane/internal/testpoll"
	"github.com/tailplane/tailplane/runtime"
)

var secrets = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}

const (
	memberLabel     = "tailplane.test/member"
	groupAnnotation = "tailplane.test/group"
	memberFinalizer = "tailplane.test/member"
)

// served is a member kind of the test only: a Secret labelled
// tailplane.test/member is served by the ConfigMap its annotation names
// (in its namespace), when that exists. It records what the hooks did.
type served struct {
	kube kubernetes.Interface

	mu                       sync.Mutex
	serving                  map[string]string // member -> group
	serves, released, clears map[string]int
}

func (s *served) module() pipeline.MemberModule[string] {
	key := func(obj *unstructured.Unstructured) string { return obj.GetName() }
	return pipeline.MemberModule[string]{
		ID: "served", Resource: secrets, Kind: "Secret", Finalizer: memberFinalizer, Index: "served-by-group",
		GroupResource: configMaps,
		IsOurs:        func(obj *unstructured.Unstructured) bool { return obj.GetLabels()[memberLabel] == "true" },
		Group: func(obj *unstructured.Unstructured) string {
			if g := obj.GetAnnotations()[groupAnnotation]; g != "" {
				return obj.GetNamespace() + "/" + g
			}
			return ""
		},
		Admit: func(ctx context.Context, obj *unstructured.Unstructured) (string, bool, error) {
			g := obj.GetAnnotations()[groupAnnotation]
			_, err := s.kube.CoreV1().ConfigMaps(obj.GetNamespace()).Get(ctx, g, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return "", false, nil
			}
			return g, err == nil, err
		},
		Serve: func(_ context.Context, obj *unstructured.Unstructured, group string) error {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.serving[key(obj)] = group
			s.serves[key(obj)]++
			return nil
		},
		Release: func(_ context.Context, obj *unstructured.Unstructured) error {
			s.mu.Lock()
			defer s.mu.Unlock()
			delete(s.serving, key(obj))
			s.released[key(obj)]++
			return nil
		},
		Clear: func(_ context.Context, obj *unstructured.Unstructured) error {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.clears[key(obj)]++
			return nil
		},
	}
}

func (s *served) state(member string) (group string, released, clears int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.serving[member], s.released[member], s.clears[member]
}

// The member lifecycle: an admitted member gets the finalizer and is
// served; one whose group is missing is not, until the group appears; a
// change of a group re-handles its members (through the index); one that stops asking
// is released, its status cleared and the finalizer removed; a deleted one
// is released and goes.
func TestMemberLifecycle(t *testing.T) {
	kube, ns := env.Clientset(t), env.Namespace(t)
	api := tailnettest.NewServer()
	t.Cleanup(api.Close)
	backend, err := tailnet.NewTailscale(tailnet.Options{LoginServer: api.URL, ClientID: tailnettest.ClientID, ClientSecret: tailnettest.ClientSecret})
	if err != nil {
		t.Fatal(err)
	}
	cfg := env.Config(t)
	op, err := runtime.New(cfg, runtime.Settings{HealthAddress: "-", MetricsAddress: "-", Finalizer: "tailscale.com/finalizer",
		MinBackoff: 200 * time.Millisecond, MaxBackoff: 2 * time.Second, Logger: runtime.NewLogger(io.Discard, false)})
	if err != nil {
		t.Fatal(err)
	}
	d := cluster.NewDeps(op, kubernetes.NewForConfigOrDie(cfg), dynamic.NewForConfigOrDie(cfg), backend,
		settings.Settings{Namespace: env.Namespace(t), ProxyTags: []string{"tag:k8s"}}, runtime.NewLogger(io.Discard, false))
	d.WatchNamespace = ns
	s := &served{kube: kube, serving: map[string]string{}, serves: map[string]int{}, released: map[string]int{}, clears: map[string]int{}}
	members := pipeline.RegisterMember(pipeline.New(d), op, s.module())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- op.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	group := func(name string) {
		t.Helper()
		if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	member := func(name, group string) {
		t.Helper()
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{memberLabel: "true"},
			Annotations: map[string]string{groupAnnotation: group}}}
		if _, err := kube.CoreV1().Secrets(ns).Create(ctx, sec, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	finalizers := func(name string) ([]string, error) {
		sec, err := kube.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return sec.Finalizers, nil
	}
	want := func(what string, cond func() error) {
		t.Helper()
		testpoll.Until(t, 30*time.Second, what, cond)
	}

	group("g1")
	member("m", "g1")
	want("m served by g1, with the finalizer", func() error {
		f, err := finalizers("m")
		if g, _, _ := s.state("m"); err != nil || g != "g1" || !slices.Contains(f, memberFinalizer) {
			return fmt.Errorf("group %q finalizers %v %v", g, f, err)
		}
		if keys := members.Keys(ns + "/g1"); len(keys) != 1 || keys[0].Name != "m" || keys[0].Resource != secrets {
			return fmt.Errorf("index %+v", keys)
		}
		return nil
	})

	member("late", "g2")
	want("late indexed under its missing group", func() error {
		if keys := members.Keys(ns + "/g2"); len(keys) != 1 {
			return fmt.Errorf("index %+v", keys)
		}
		return nil
	})
	if f, err := finalizers("late"); err != nil || slices.Contains(f, memberFinalizer) {
		t.Fatalf("a refused member got the finalizer: %v %v", f, err)
	}
	if g, _, _ := s.state("late"); g != "" {
		t.Fatalf("a refused member is served by %q", g)
	}
	group("g2")
	want("late served once g2 exists", func() error {
		if g, _, _ := s.state("late"); g != "g2" {
			return fmt.Errorf("group %q", g)
		}
		return nil
	})

	// A change of the group has its members served again.
	s.mu.Lock()
	before := s.serves["late"]
	s.mu.Unlock()
	data, _ := json.Marshal(map[string]any{"data": map[string]string{"changed": "yes"}})
	if _, err := kube.CoreV1().ConfigMaps(ns).Patch(ctx, "g2", types.MergePatchType, data, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	want("late served again after g2 changed", func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.serves["late"] <= before {
			return fmt.Errorf("served %d times", s.serves["late"])
		}
		return nil
	})

	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{memberLabel: nil}}})
	if _, err := kube.CoreV1().Secrets(ns).Patch(ctx, "m", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	want("m released, cleared, without the finalizer, out of the index", func() error {
		f, err := finalizers("m")
		g, released, clears := s.state("m")
		if err != nil || g != "" || released == 0 || clears == 0 || slices.Contains(f, memberFinalizer) {
			return fmt.Errorf("group %q released %d cleared %d finalizers %v %v", g, released, clears, f, err)
		}
		if keys := members.Keys(ns + "/g1"); len(keys) != 0 {
			return fmt.Errorf("index %+v", keys)
		}
		return nil
	})

	if err := kube.CoreV1().Secrets(ns).Delete(ctx, "late", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	want("late released and gone", func() error {
		_, err := finalizers("late")
		g, released, clears := s.state("late")
		if !apierrors.IsNotFound(err) || g != "" || released == 0 || clears != 0 {
			return fmt.Errorf("group %q released %d cleared %d: %v", g, released, clears, err)
		}
		return nil
	})
}
