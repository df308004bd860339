package handlers_test

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/tailplane/tailplane/handlers/unsupported"
	"github.com/tailplane/tailplane/internal/testpoll"
)

// Recorders and PeerRelays are accepted, and never silently ignored: each
// gets its Ready condition False with reason NotSupported, saying what to use
// instead, and a Warning Event; a change of spec is answered again.
func TestUnsupportedKindsSayWhatToUseInstead(t *testing.T) {
	h := newHarnessOpts(t, true, nil)
	specs := map[string]string{
		"Recorder":  `{"enableUI":true}`,
		"PeerRelay": `{"replicas":1}`,
	}
	changes := map[string]string{
		"Recorder":  `{"tags":["tag:rec"]}`,
		"PeerRelay": `{"replicas":2}`,
	}
	for _, k := range unsupported.Kinds() {
		t.Run(k.Kind, func(t *testing.T) {
			name := strings.ToLower(k.Kind) + "-" + h.ns
			h.createClusterCR(k.Resource, k.Kind, name, specs[k.Kind])
			wantNotSupported := func(generation int64) {
				testpoll.Until(t, settle, k.Condition+" of "+name, func() error {
					obj, err := h.dyn.Resource(k.Resource).Get(h.ctx(), name, metav1.GetOptions{})
					if err != nil {
						return err
					}
					conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
					for _, c := range conds {
						m := c.(map[string]any)
						if m["type"] != k.Condition {
							continue
						}
						if m["status"] != "False" || m["reason"] != unsupported.ReasonNotSupported || m["observedGeneration"] != generation ||
							!strings.Contains(fmt.Sprint(m["message"]), "Tailplane does not support "+k.Kind+" yet") ||
							!strings.Contains(fmt.Sprint(m["message"]), "instead") {
							return fmt.Errorf("condition %v at generation %d", m, generation)
						}
						return nil
					}
					return fmt.Errorf("no %s condition in %v", k.Condition, conds)
				})
			}
			wantNotSupported(1)
			h.wantEvent("default", name, corev1.EventTypeWarning, unsupported.ReasonNotSupported, "Tailplane does not support "+k.Kind+" yet")
			h.patchSpec(k.Resource, name, changes[k.Kind])
			wantNotSupported(2)
		})
	}
}
