package proxyclass

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/tailplane/tailplane/crds/tailscale/v1alpha1"
	"github.com/tailplane/tailplane/handlers/lib/cluster"
	"github.com/tailplane/tailplane/handlers/lib/proxyclassrules"
	"github.com/tailplane/tailplane/handlers/lib/resources"
	"github.com/tailplane/tailplane/internal/proxystate"
)

// probeServiceName is the Service the NodePort range probe asks for; the
// API server refuses it, so it never exists.
const probeServiceName = "tailplane-nodeport-range-probe"

// validRange finds "30000-32767" in the API server's refusal of a node
// port outside the range ("... The range of valid ports is 30000-32767").
var validRange = regexp.MustCompile(`valid ports is (\d{1,5})-(\d{1,5})`)

// validateNodePorts checks pc's static endpoint ranges against the
// cluster's NodePort range and the other ProxyClasses' ranges.
func (m *module) validateNodePorts(ctx context.Context, pc *v1alpha1.ProxyClass) (field.ErrorList, error) {
	if pc.Spec.StaticEndpoints == nil || pc.Spec.StaticEndpoints.NodePort == nil {
		return nil, nil
	}
	list, err := m.d.Dyn.Resource(resources.ProxyClasses).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list ProxyClasses: %w", err)
	}
	others := map[string][]v1alpha1.PortRange{}
	for i := range list.Items {
		if list.Items[i].GetDeletionTimestamp() != nil {
			continue // going: its ports are free
		}
		var other v1alpha1.ProxyClass
		if err := cluster.FromUnstructured(&list.Items[i], &other); err != nil {
			continue // refused by its own validation
		}
		if se := other.Spec.StaticEndpoints; se != nil && se.NodePort != nil {
			others[other.Name] = se.NodePort.Ports
		}
	}
	return proxyclassrules.ValidateNodePorts(pc, m.clusterNodePortRange(ctx), others), nil
}

// clusterNodePortRange is the cluster's NodePort range, learned once as
// the official operator learns it: the API server names it when it
// refuses a Service asking for node port 1. nil while unknown (ranges are
// then not checked against it).
func (m *module) clusterNodePortRange(ctx context.Context) *v1alpha1.PortRange {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.nodePortRange != nil {
		return m.nodePortRange
	}
	r, err := m.probeNodePortRange(ctx)
	if err != nil {
		m.d.Log.Warn("cannot learn the cluster's NodePort range; ProxyClass staticEndpoints ports are not checked against it", "err", err)
		return nil
	}
	m.d.Log.Info("learned the cluster's NodePort range", "range", proxyclassrules.RangeString(*r))
	m.nodePortRange = r
	return r
}

func (m *module) probeNodePortRange(ctx context.Context) (*v1alpha1.PortRange, error) {
	ns := m.d.Settings.Namespace
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: probeServiceName, Namespace: ns, Labels: map[string]string{proxystate.LabelManaged: "true"}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort,
			Ports: []corev1.ServicePort{{Name: "probe", Port: 1, Protocol: corev1.ProtocolUDP, NodePort: 1}}},
	}
	_, err := m.d.Kube.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
	if err == nil {
		// The cluster allows node port 1: its range is not the usual kind.
		_ = m.d.Kube.CoreV1().Services(ns).Delete(ctx, probeServiceName, metav1.DeleteOptions{})
		return nil, errors.New("the API server accepted node port 1")
	}
	if !apierrors.IsInvalid(err) {
		return nil, err
	}
	match := validRange.FindStringSubmatch(err.Error())
	if match == nil {
		return nil, fmt.Errorf("no range in the API server's answer: %w", err)
	}
	from, _ := strconv.ParseUint(match[1], 10, 16)
	to, _ := strconv.ParseUint(match[2], 10, 16)
	return &v1alpha1.PortRange{Port: uint16(from), EndPort: uint16(to)}, nil
}

// revalidateClashing has the ProxyClasses refused for clashing with the
// class name validated again (name changed or is gone).
func (m *module) revalidateClashing(ctx context.Context, name string) error {
	list, err := m.d.Dyn.Resource(resources.ProxyClasses).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list ProxyClasses: %w", err)
	}
	for _, u := range list.Items {
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			if c, ok := c.(map[string]any); ok && c["type"] == v1alpha1.ProxyClassReady && c["status"] == "False" {
				if msg, _ := c["message"].(string); u.GetName() != name && proxyclassrules.ClashesWith(msg, name) {
					m.d.Op.Enqueue(resources.ProxyClasses, u.GetName(), 0)
				}
			}
		}
	}
	return nil
}
