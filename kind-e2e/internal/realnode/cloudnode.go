package realnode

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// uninitializedTaint is the taint a kubelet started with
// --cloud-provider=external puts on its new Node until a cloud provider's
// node controller has set the Node up.
const uninitializedTaint = "node.cloudprovider.kubernetes.io/uninitialized"

// initializeNode does for the Node what an external cloud provider's node
// controller does: it sets the Node's addresses (InternalIP, ExternalIP,
// Hostname) and removes the uninitialized taint. The kubelet keeps
// addresses it finds set, so the ExternalIP stays. It does nothing to a
// Node already set up.
func initializeNode(ctx context.Context, client kubernetes.Interface, node *corev1.Node) error {
	want := []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: NodeIP},
		{Type: corev1.NodeExternalIP, Address: ExternalIP},
		{Type: corev1.NodeHostName, Address: node.Name},
	}
	if !slices.Equal(node.Status.Addresses, want) {
		patch, err := json.Marshal(map[string]any{"status": map[string]any{"addresses": want}})
		if err != nil {
			return err
		}
		if _, err := client.CoreV1().Nodes().Patch(ctx, node.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
			return fmt.Errorf("set the addresses of node %s: %w", node.Name, err)
		}
	}
	if !slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == uninitializedTaint }) {
		return nil
	}
	taints := slices.DeleteFunc(slices.Clone(node.Spec.Taints), func(t corev1.Taint) bool { return t.Key == uninitializedTaint })
	// A JSON merge patch replaces the whole list; resourceVersion makes it
	// fail instead of dropping a taint added meanwhile.
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": node.ResourceVersion}, "spec": map[string]any{"taints": taints}})
	if err != nil {
		return err
	}
	if _, err := client.CoreV1().Nodes().Patch(ctx, node.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("remove the %s taint of node %s: %w", uninitializedTaint, node.Name, err)
	}
	return nil
}
