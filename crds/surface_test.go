package crds_test

import (
	"fmt"
	"reflect"
	"sort"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// surface is what a user sees of a CRD besides its schema: names, scope,
// the default printer columns (descriptions aside; kubectl get shows those
// of priority 0, -o wide all), subresources, and every CEL rule with its
// message and where it sits.
func surface(crd *unstructured.Unstructured) map[string]any {
	names, _, _ := unstructured.NestedMap(crd.Object, "spec", "names")
	scope, _, _ := unstructured.NestedString(crd.Object, "spec", "scope")
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	out := map[string]any{"names": names, "scope": scope, "versions": len(versions)}
	if len(versions) == 0 {
		return out
	}
	v := versions[0].(map[string]any)
	var cols []string
	columns, _, _ := unstructured.NestedSlice(v, "additionalPrinterColumns")
	for _, c := range columns {
		m := c.(map[string]any)
		if p := fmt.Sprint(m["priority"]); p != "<nil>" && p != "0" {
			continue // -o wide only: Tailplane may add these
		}
		cols = append(cols, fmt.Sprintf("%v|%v|%v", m["name"], m["type"], m["jsonPath"]))
	}
	out["columns"] = cols
	out["subresources"] = v["subresources"]
	out["served"], out["storage"], out["version"] = v["served"], v["storage"], v["name"]
	schema, _, _ := unstructured.NestedMap(v, "schema", "openAPIV3Schema")
	var rules []string
	celRules(schema, "", &rules)
	sort.Strings(rules)
	out["rules"] = rules
	return out
}

func celRules(schema map[string]any, path string, out *[]string) {
	if vs, ok := schema["x-kubernetes-validations"].([]any); ok {
		for _, v := range vs {
			m := v.(map[string]any)
			*out = append(*out, fmt.Sprintf("%s: %v => %v", path, m["rule"], m["message"]))
		}
	}
	if props, ok := schema["properties"].(map[string]any); ok {
		for name, p := range props {
			celRules(p.(map[string]any), path+"."+name, out)
		}
	}
	if items, ok := schema["items"].(map[string]any); ok {
		celRules(items, path+"[]", out)
	}
	if ap, ok := schema["additionalProperties"].(map[string]any); ok {
		celRules(ap, path+"{}", out)
	}
}

// withoutDescriptions returns a copy of a schema without its description
// texts (ours are written anew) and without metadata in the top level's
// required list (the official generator lists it for some kinds; the API
// server requires metadata anyway).
func withoutDescriptions(v any, top bool) any {
	switch v := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, x := range v {
			if k == "description" {
				continue
			}
			if k == "required" && top {
				var req []any
				for _, r := range x.([]any) {
					if r != "metadata" {
						req = append(req, r)
					}
				}
				out[k] = req
				continue
			}
			out[k] = withoutDescriptions(x, false)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = withoutDescriptions(x, false)
		}
		return out
	}
	return v
}

func schemaOf(crd *unstructured.Unstructured) map[string]any {
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	schema, _, _ := unstructured.NestedMap(versions[0].(map[string]any), "schema", "openAPIV3Schema")
	return schema
}

// Each of the eight official CRDs is in crds/ with the official names, short
// names, scope, default printer columns (extra ones only with -o wide), subresources, CEL rules and messages, and
// the official schema but for the description texts.
func TestCRDSurfaceMatchesOfficial(t *testing.T) {
	official, ours := officialCRDs(t), ourCRDs(t)
	for _, k := range officialKinds {
		t.Run(k.kind, func(t *testing.T) {
			want, got := surface(official[k.file]), surface(ours[k.file])
			for key := range want {
				if !reflect.DeepEqual(want[key], got[key]) {
					t.Errorf("%s differs:\n official: %v\n     ours: %v", key, want[key], got[key])
				}
			}
			// The whole schema, descriptions aside: every field, type,
			// format, pattern, enum, bound, default and list type.
			if want, got := withoutDescriptions(schemaOf(official[k.file]), true), withoutDescriptions(schemaOf(ours[k.file]), true); !reflect.DeepEqual(want, got) {
				t.Errorf("the schema differs from the official one (descriptions aside)")
			}
		})
	}
}
