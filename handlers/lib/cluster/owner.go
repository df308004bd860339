package cluster

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// OperatorDeployment is the operator's Deployment in its namespace (the
// chart's name, and deploy/manifests').
const OperatorDeployment = "operator"

// OperatorOwner returns a reference to the operator's Deployment, or nil
// when there is none (the operator runs outside the cluster). What it owns
// goes with the release: the garbage collector deletes it after helm
// uninstall deletes the Deployment. The reference does not block the
// owner's deletion: that would need the right to update the Deployment's
// finalizers, and nothing waits for it.
func (d *Deps) OperatorOwner(ctx context.Context) (*metav1.OwnerReference, error) {
	dep, err := d.Kube.AppsV1().Deployments(d.Settings.Namespace).Get(ctx, OperatorDeployment, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the operator's Deployment %s/%s: %w", d.Settings.Namespace, OperatorDeployment, err)
	}
	return &metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: dep.Name, UID: dep.UID}, nil
}
