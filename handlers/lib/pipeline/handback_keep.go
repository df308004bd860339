package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tailplane/tailplane/handlers/lib/proxyset"
)

// A hand-back leaves the proxies serving until the release is uninstalled
// when it can: their objects are given to the operator's Deployment
// (cluster.Deps.OperatorOwner; a hand-back without one stops the proxies
// at once), and the garbage collector stops them with it, seconds before
// the official operator is installed, instead of when the hand-back
// starts.

// keepUntilUninstall gives the running objects of the proxy base (its
// Pods, config Secrets, ServiceAccount, Role, RoleBinding and Services;
// parentLabels are on all of them) to owner, then deletes its StatefulSet
// leaving its Pods: the proxy serves until owner goes. A Service named
// base goes at once: the official operator's headless Service takes the
// name.
func (p *Pipeline) keepUntilUninstall(ctx context.Context, base string, parentLabels map[string]string, configs []string, owner *metav1.OwnerReference) error {
	ns := p.d.Settings.Namespace
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"ownerReferences": []metav1.OwnerReference{*owner}}})
	if err != nil {
		return err
	}
	// A strategic merge patch adds the reference (merged by UID): a Pod
	// keeps its StatefulSet's until the StatefulSet is deleted, so it is
	// never without an owner that the StatefulSet controller would adopt.
	give := func(kind string, apply func(string) error, name string) error {
		if err := ignoreNotFound(apply(name)); err != nil {
			return fmt.Errorf("give %s %s/%s to the operator's Deployment: %w", kind, ns, name, err)
		}
		return nil
	}
	opts := metav1.PatchOptions{FieldManager: adoptionManager}
	sel := labels.SelectorFromSet(parentLabels).String()
	pods, err := p.d.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return fmt.Errorf("list the Pods of proxy %s: %w", base, err)
	}
	for _, pod := range pods.Items {
		if strings.HasPrefix(pod.Name, base+"-") {
			if err := give("Pod", func(n string) error {
				_, err := p.d.Kube.CoreV1().Pods(ns).Patch(ctx, n, types.StrategicMergePatchType, patch, opts)
				return err
			}, pod.Name); err != nil {
				return err
			}
		}
	}
	for _, name := range configs {
		if err := give("Secret", func(n string) error {
			_, err := p.d.Kube.CoreV1().Secrets(ns).Patch(ctx, n, types.StrategicMergePatchType, patch, opts)
			return err
		}, name); err != nil {
			return err
		}
	}
	for kind, apply := range map[string]func(string) error{
		"ServiceAccount": func(n string) error {
			_, err := p.d.Kube.CoreV1().ServiceAccounts(ns).Patch(ctx, n, types.StrategicMergePatchType, patch, opts)
			return err
		},
		"Role": func(n string) error {
			_, err := p.d.Kube.RbacV1().Roles(ns).Patch(ctx, n, types.StrategicMergePatchType, patch, opts)
			return err
		},
		"RoleBinding": func(n string) error {
			_, err := p.d.Kube.RbacV1().RoleBindings(ns).Patch(ctx, n, types.StrategicMergePatchType, patch, opts)
			return err
		},
	} {
		if err := give(kind, apply, base); err != nil {
			return err
		}
	}
	services, err := p.d.Kube.CoreV1().Services(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return fmt.Errorf("list the Services of proxy %s: %w", base, err)
	}
	for _, s := range services.Items {
		switch {
		case s.Name == base && s.Labels[proxyset.LabelProxyRole] != "":
			if err := ignoreNotFound(p.d.Kube.CoreV1().Services(ns).Delete(ctx, s.Name, metav1.DeleteOptions{})); err != nil {
				return fmt.Errorf("delete Service %s/%s: %w", ns, s.Name, err)
			}
		case strings.HasPrefix(s.Name, base+"-"):
			if err := give("Service", func(n string) error {
				_, err := p.d.Kube.CoreV1().Services(ns).Patch(ctx, n, types.StrategicMergePatchType, patch, opts)
				return err
			}, s.Name); err != nil {
				return err
			}
		}
	}
	orphan := metav1.DeletePropagationOrphan
	if err := ignoreNotFound(p.d.Kube.AppsV1().StatefulSets(ns).Delete(ctx, base, metav1.DeleteOptions{PropagationPolicy: &orphan})); err != nil {
		return fmt.Errorf("delete StatefulSet %s/%s leaving its Pods: %w", ns, base, err)
	}
	return nil
}
