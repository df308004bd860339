// Package conditions edits the metav1.Condition lists of status: set one
// (keeping its transition time while its status holds), remove one. Pure: it
// imports only apimachinery.
package conditions

import (
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Set returns conds with c set (LastTransitionTime kept when the status did
// not change); the list given is not modified.
func Set(conds []metav1.Condition, c metav1.Condition) []metav1.Condition {
	c.Message = trimMessage(c.Message)
	if c.LastTransitionTime.IsZero() {
		c.LastTransitionTime = metav1.NewTime(time.Now().Truncate(time.Second))
	}
	out := append([]metav1.Condition(nil), conds...)
	meta.SetStatusCondition(&out, c)
	return out
}

// Remove returns conds without the condition of type t.
func Remove(conds []metav1.Condition, t string) []metav1.Condition {
	out := append([]metav1.Condition(nil), conds...)
	meta.RemoveStatusCondition(&out, t)
	return out
}

// trimMessage keeps conditions readable.
func trimMessage(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 1000 {
		s = s[:997] + "..."
	}
	return s
}

// Changed reports whether c says something conds do not: none of its type
// yet, or one with another status, reason, message or observed generation.
// Warning Events go with a change only: the condition is stored on the
// object, so an operator restart (which handles every object again) does
// not post the same Event again, while a new cause or a new generation
// does.
func Changed(conds []metav1.Condition, c metav1.Condition) bool {
	old := meta.FindStatusCondition(conds, c.Type)
	return old == nil || old.Status != c.Status || old.Reason != c.Reason ||
		old.Message != trimMessage(c.Message) || old.ObservedGeneration != c.ObservedGeneration
}
