package runtime

import (
	"fmt"
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Predicate decides whether a handler applies to an object. Predicates must
// be quick and must not change the object.
type Predicate func(obj *unstructured.Unstructured) bool

// Matcher tests one value (of a label, an annotation or a field) and whether
// it is present at all. Present, Absent, Equals and MatchFunc build one.
type Matcher func(value any, present bool) bool

// Present matches a value that exists, whatever it is (an empty string counts).
func Present() Matcher { return func(_ any, present bool) bool { return present } }

// Absent matches a value that does not exist.
func Absent() Matcher { return func(_ any, present bool) bool { return !present } }

// Equals matches a present value deeply equal to want.
func Equals(want any) Matcher {
	return func(v any, present bool) bool { return present && reflect.DeepEqual(v, want) }
}

// MatchFunc matches a present value for which fn returns true.
func MatchFunc[T any](fn func(T) bool) Matcher {
	return func(v any, present bool) bool {
		t, ok := v.(T)
		return present && ok && fn(t)
	}
}

// matcher turns a filter argument into a Matcher: a Matcher is used as is,
// anything else must equal the value.
func matcher(want any) Matcher {
	switch w := want.(type) {
	case Matcher:
		return w
	case func(any, bool) bool:
		return w
	default:
		return Equals(want)
	}
}

// HasLabel matches objects whose label key satisfies want: a Matcher
// (Present(), Absent(), MatchFunc(...)) or a value that must be equal.
func HasLabel(key string, want any) Predicate {
	m := matcher(want)
	return func(obj *unstructured.Unstructured) bool {
		v, ok := obj.GetLabels()[key]
		return m(v, ok)
	}
}

// HasAnnotation is HasLabel for annotations.
func HasAnnotation(key string, want any) Predicate {
	m := matcher(want)
	return func(obj *unstructured.Unstructured) bool {
		v, ok := obj.GetAnnotations()[key]
		return m(v, ok)
	}
}

// HasField matches objects whose field at the dotted path (e.g.
// "spec.replicas") satisfies want, like HasLabel. JSON numbers are int64 or
// float64 in unstructured objects.
func HasField(path string, want any) Predicate {
	m := matcher(want)
	fields := splitPath(path)
	return func(obj *unstructured.Unstructured) bool {
		v, ok, _ := unstructured.NestedFieldNoCopy(obj.Object, fields...)
		return m(v, ok)
	}
}

// And matches when every predicate matches (and when there are none).
func And(ps ...Predicate) Predicate {
	return func(obj *unstructured.Unstructured) bool {
		for _, p := range ps {
			if !p(obj) {
				return false
			}
		}
		return true
	}
}

// Or matches when at least one predicate matches.
func Or(ps ...Predicate) Predicate {
	return func(obj *unstructured.Unstructured) bool {
		for _, p := range ps {
			if p(obj) {
				return true
			}
		}
		return false
	}
}

// Not inverts a predicate.
func Not(p Predicate) Predicate {
	return func(obj *unstructured.Unstructured) bool { return !p(obj) }
}

func splitPath(path string) []string { return strings.Split(strings.Trim(path, "."), ".") }

func validPath(path string) error {
	for _, f := range splitPath(path) {
		if f == "" {
			return fmt.Errorf("field path %q has an empty segment", path)
		}
	}
	return nil
}
