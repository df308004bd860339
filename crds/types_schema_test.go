package crds_test

import (
	"reflect"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/tailplane/tailplane/crds"
	"github.com/tailplane/tailplane/crds/tailscale/v1alpha1"
)

// ourPkg is the package path of the Go types; recursion stops at types from
// other packages (Kubernetes' own), whose schemas are Kubernetes'.
var ourPkg = reflect.TypeOf(v1alpha1.ProxyClass{}).PkgPath()

// jsonFields returns the JSON field names of a struct and their types,
// following inline (embedded) fields.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" && strings.Contains(opts, "inline") {
			continue // TypeMeta: apiVersion and kind are checked by the apiserver.
		}
		out[name] = f.Type
	}
	return out
}

// elem strips pointers, slices and maps down to the type whose schema the
// YAML nests.
func elem(t reflect.Type) (reflect.Type, string) {
	path := ""
	for {
		switch t.Kind() {
		case reflect.Pointer:
			t = t.Elem()
		case reflect.Slice:
			t, path = t.Elem(), path+".items"
		case reflect.Map:
			t, path = t.Elem(), path+".additionalProperties"
		default:
			return t, path
		}
	}
}

func schemaAt(schema map[string]any, sub string) map[string]any {
	for _, part := range strings.Split(strings.TrimPrefix(sub, "."), ".") {
		if part == "" {
			continue
		}
		next, _ := schema[part].(map[string]any)
		schema = next
	}
	return schema
}

// compare checks that the struct t and the schema have the same field names,
// recursing into struct fields of our own package.
func compare(t *testing.T, where string, typ reflect.Type, schema map[string]any) {
	t.Helper()
	props, _ := schema["properties"].(map[string]any)
	fields := jsonFields(typ)
	var names []string
	for name := range fields {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		prop, ok := props[name].(map[string]any)
		if !ok {
			t.Errorf("%s.%s: Go field %s has no property in the CRD schema", where, name, typ.Name())
			continue
		}
		ft, sub := elem(fields[name])
		if ft.Kind() == reflect.Struct && ft.PkgPath() == ourPkg {
			compare(t, where+"."+name, ft, schemaAt(prop, sub))
		}
	}
	for name := range props {
		if name == "apiVersion" || name == "kind" {
			continue
		}
		if _, ok := fields[name]; !ok {
			t.Errorf("%s.%s: CRD property has no Go field in %s", where, name, typ.Name())
		}
	}
}

func crdSchema(t *testing.T, name string) map[string]any {
	t.Helper()
	objs, err := crds.Objects()
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetName() != name {
			continue
		}
		versions, _, _ := unstructured.NestedSlice(o.Object, "spec", "versions")
		schema, _, _ := unstructured.NestedMap(versions[0].(map[string]any), "schema", "openAPIV3Schema")
		return schema
	}
	t.Fatalf("no CRD %s in crds/", name)
	return nil
}

// The Go types that handlers decode into must name exactly the fields the
// CRD YAML (what users install) declares, at every level of our own types.
func TestGoTypesMatchCRDSchemas(t *testing.T) {
	for _, tc := range []struct {
		crd string
		typ reflect.Type
	}{
		{"connectors.tailscale.com", reflect.TypeOf(v1alpha1.Connector{})},
		{"proxyclasses.tailscale.com", reflect.TypeOf(v1alpha1.ProxyClass{})},
		{"proxygroups.tailscale.com", reflect.TypeOf(v1alpha1.ProxyGroup{})},
		{"dnsconfigs.tailscale.com", reflect.TypeOf(v1alpha1.DNSConfig{})},
		{"recorders.tailscale.com", reflect.TypeOf(v1alpha1.Recorder{})},
		{"tailnets.tailscale.com", reflect.TypeOf(v1alpha1.Tailnet{})},
		{"proxygrouppolicies.tailscale.com", reflect.TypeOf(v1alpha1.ProxyGroupPolicy{})},
		{"peerrelays.tailscale.com", reflect.TypeOf(v1alpha1.PeerRelay{})},
	} {
		t.Run(tc.typ.Name(), func(t *testing.T) {
			compare(t, tc.typ.Name(), tc.typ, crdSchema(t, tc.crd))
		})
	}
}
