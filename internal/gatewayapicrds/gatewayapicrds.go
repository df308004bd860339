// Package gatewayapicrds holds the Gateway API's experimental-channel CRDs
// (sigs.k8s.io/gateway-api at the version in go.mod; go tool task
// manifests:gateway-crds copies them) and installs them into a cluster.
//
// The chart carries the standard channel as templates. It cannot carry the
// experimental channel as well: with both, the Helm release Secret passes
// the API server's 1 MiB limit and helm install fails. So with
// gatewayAPI.channel=experimental the chart runs the operator image as a
// pre-install and pre-upgrade hook (TAILPLANE_GATEWAY_API_CRDS), which
// installs these.
//
// It imports apimachinery and client-go only.
package gatewayapicrds

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

//go:embed experimental/*.yaml
var experimental embed.FS

// CRDs is the CustomResourceDefinition resource.
var CRDs = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// FieldManager is the server-side apply field manager of the CRDs Install
// writes.
const FieldManager = "tailplane-gateway-api-crds"

// AnnotationRelease, on a CRD Install wrote, names the Helm release
// ("namespace/name") whose hook installed it: that release keeps
// upgrading it.
const AnnotationRelease = "tailplane.dev/gateway-api-crds-release"

// Helm's annotations on the objects of a release: a standard-channel CRD the
// same release installed from its templates is upgraded to the experimental
// one.
const (
	helmReleaseName      = "meta.helm.sh/release-name"
	helmReleaseNamespace = "meta.helm.sh/release-namespace"
)

// Mode says which CRDs Install writes, as the chart's
// gatewayAPI.installCRDs.
type Mode string

const (
	// ModeAuto writes a CRD the cluster does not have, or one this
	// release installed (by its hook or its templates); one installed
	// otherwise (another chart, kubectl) is left alone.
	ModeAuto Mode = "auto"
	// ModeAlways writes every CRD, taking over the fields it sets.
	ModeAlways Mode = "true"
)

// ParseMode reads a Mode.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case ModeAuto, ModeAlways:
		return m, nil
	}
	return "", fmt.Errorf("%q is not a mode: want auto or true", s)
}

// Objects returns the experimental channel's CRDs, sorted by name.
func Objects() ([]*unstructured.Unstructured, error) {
	names, err := fs.Glob(experimental, "experimental/*.yaml")
	if err != nil {
		return nil, err
	}
	out := make([]*unstructured.Unstructured, 0, len(names))
	for _, n := range names {
		b, err := experimental.ReadFile(n)
		if err != nil {
			return nil, err
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(b, &u.Object); err != nil {
			return nil, fmt.Errorf("%s: %w", path.Base(n), err)
		}
		out = append(out, u)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetName() < out[j].GetName() })
	return out, nil
}

// Result says what Install did, by CRD name.
type Result struct {
	Applied, LeftAlone []string
}

// Install applies objs (CRDs) as release ("namespace/name") with mode: each
// with server-side apply, forced, marked with AnnotationRelease. A CRD is
// left alone in ModeAuto when it exists and neither this release's hook nor
// its templates installed it.
func Install(ctx context.Context, dyn dynamic.Interface, objs []*unstructured.Unstructured, mode Mode, release string) (Result, error) {
	var res Result
	crds := dyn.Resource(CRDs)
	for _, obj := range objs {
		name := obj.GetName()
		if mode == ModeAuto {
			live, err := crds.Get(ctx, name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
			case err != nil:
				return res, fmt.Errorf("read CRD %s: %w", name, err)
			case !ownedBy(live, release):
				res.LeftAlone = append(res.LeftAlone, name)
				continue
			}
		}
		want := obj.DeepCopy()
		ann := want.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann[AnnotationRelease] = release
		want.SetAnnotations(ann)
		body, err := json.Marshal(want.Object)
		if err != nil {
			return res, err
		}
		force := true
		if _, err := crds.Patch(ctx, name, types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: FieldManager, Force: &force}); err != nil {
			return res, fmt.Errorf("apply CRD %s: %w", name, err)
		}
		res.Applied = append(res.Applied, name)
	}
	return res, nil
}

// ownedBy reports whether release installed live: by this package
// (AnnotationRelease) or from its chart's templates (Helm's annotations).
func ownedBy(live *unstructured.Unstructured, release string) bool {
	ann := live.GetAnnotations()
	if ann[AnnotationRelease] == release {
		return true
	}
	return ann[helmReleaseNamespace]+"/"+ann[helmReleaseName] == release
}
