package runtime

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"
)

// cachedObject is how the informers keep an object: its JSON (without
// managedFields, which no handler needs) and the three fields client-go's
// store reads. A decoded *unstructured.Unstructured takes five to six times
// its JSON in memory (a map and a boxed string per field); an operator that
// watches every Service, Pod and Secret of a cluster spends most of its
// memory on that cache, and a handler looks at an object only when it
// changes. Every read decodes a fresh copy, so a handler may also modify
// what it is given without corrupting the cache.
type cachedObject struct {
	namespace, name, resourceVersion string
	raw                              []byte
}

// GetObjectMeta makes cachedObject a metav1.ObjectMetaAccessor, which is
// all client-go's key functions and resourceVersion checks ask of a stored
// object.
func (c *cachedObject) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Namespace: c.namespace, Name: c.name, ResourceVersion: c.resourceVersion}
}

// decode returns a fresh copy of the object (nil if its JSON does not
// decode, which cannot happen to JSON the transform wrote).
func (c *cachedObject) decode() *unstructured.Unstructured {
	obj, err := decodeJSONObject(c.raw)
	if err != nil {
		return nil
	}
	return &unstructured.Unstructured{Object: obj}
}

// compact is the informers' transform: a decoded object becomes a
// cachedObject. Anything else (client-go's DeletedFinalStateUnknown, whose
// object went through the transform already) passes as it is.
func compact(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	u.SetManagedFields(nil)
	// Written into a buffer most objects fit in, then copied to its size:
	// the cache keeps exactly the JSON, and growing from nothing would
	// allocate five or six times on the way.
	buf, err := appendJSON(make([]byte, 0, 1024), u.Object)
	if err != nil {
		return nil, err
	}
	raw := make([]byte, len(buf))
	copy(raw, buf)
	return &cachedObject{namespace: u.GetNamespace(), name: u.GetName(), resourceVersion: u.GetResourceVersion(), raw: raw}, nil
}

// asUnstructured returns a fresh decoded copy of what an informer stored or
// delivered (nil for anything else).
func asUnstructured(obj any) *unstructured.Unstructured {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	switch o := obj.(type) {
	case *cachedObject:
		return o.decode()
	case *unstructured.Unstructured:
		return o
	}
	return nil
}

// cachedKey is the Key of what an informer stored or delivered, without
// decoding it.
func cachedKey(obj any) (namespace, name string, ok bool) {
	if d, isTomb := obj.(cache.DeletedFinalStateUnknown); isTomb {
		obj = d.Obj
	}
	switch o := obj.(type) {
	case *cachedObject:
		return o.namespace, o.name, true
	case *unstructured.Unstructured:
		return o.GetNamespace(), o.GetName(), true
	}
	return "", "", false
}
