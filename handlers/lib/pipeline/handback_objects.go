package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/tailplane/tailplane/handlers/lib/adoption"
	"github.com/tailplane/tailplane/handlers/lib/proxyset"
	"github.com/tailplane/tailplane/handlers/lib/resources"
	"github.com/tailplane/tailplane/handlers/lib/tsservice"
	"github.com/tailplane/tailplane/internal/proxystate"
)

// The objects of a hand-back (handback.go): stopping or keeping Tailplane's
// proxy, writing the official Secrets, the certificates.

// stopOrKeep ends Tailplane's proxy base: given to the operator's
// Deployment to serve until the release goes (keepUntilUninstall), or,
// without one, stopped now: its objects but the state Secrets deleted once
// its processes have ended.
func (p *Pipeline) stopOrKeep(ctx context.Context, base string, parentLabels map[string]string, configs []string) error {
	if p.handBackOwner != nil {
		return p.keepUntilUninstall(ctx, base, parentLabels, configs, p.handBackOwner)
	}
	if err := p.deleteProxyObjects(ctx, base, parentLabels); err != nil {
		return err
	}
	if err := p.waitProcessesStopped(ctx, base, parentLabels); err != nil {
		return err
	}
	for _, name := range configs {
		if err := ignoreNotFound(p.d.Kube.CoreV1().Secrets(p.d.Settings.Namespace).Delete(ctx, name, metav1.DeleteOptions{})); err != nil {
			return fmt.Errorf("delete config Secret %s: %w", name, err)
		}
	}
	return nil
}

// waitProcessesStopped waits until no Pod of the proxy base runs a process:
// the official proxy must not start while Tailplane's still holds the node
// key.
func (p *Pipeline) waitProcessesStopped(ctx context.Context, base string, parentLabels map[string]string) error {
	sel := metav1.FormatLabelSelector(metav1.SetAsLabelSelector(parentLabels))
	return wait.PollUntilContextTimeout(ctx, adoptRetry, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := p.d.Dyn.Resource(resources.Pods).Namespace(p.d.Settings.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return false, fmt.Errorf("list the Pods of proxy %s: %w", base, err)
		}
		return !slices.ContainsFunc(pods.Items, func(pod unstructured.Unstructured) bool {
			return strings.HasPrefix(pod.GetName(), base+"-") && !processesStopped(pod)
		}), nil
	})
}

// writeHandedBack writes one replica's official Secrets: a single proxy's
// state Secret is rewritten in place (its labels and data replaced), a
// group's is created under the official name (or updated, when a hand-back
// was cut off), then Tailplane's is deleted, or kept for its running
// replica until the release goes.
func (p *Pipeline) writeHandedBack(ctx context.Context, r adoption.HandBackReplica) error {
	secrets := p.d.Kube.CoreV1().Secrets(p.d.Settings.Namespace)
	opts := metav1.CreateOptions{FieldManager: adoptionManager}
	if r.Config != nil {
		if _, err := secrets.Create(ctx, r.Config, opts); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create the official config Secret %s: %w", r.Config.Name, err)
		}
	}
	cur, err := secrets.Get(ctx, r.State.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		if _, err := secrets.Create(ctx, r.State, opts); err != nil {
			return fmt.Errorf("create the official state Secret %s: %w", r.State.Name, err)
		}
	case err != nil:
		return fmt.Errorf("read Secret %s: %w", r.State.Name, err)
	default:
		cur.Labels, cur.Data, cur.OwnerReferences = r.State.Labels, r.State.Data, r.State.OwnerReferences
		if _, err := secrets.Update(ctx, cur, metav1.UpdateOptions{FieldManager: adoptionManager}); err != nil {
			return fmt.Errorf("write the official state Secret %s: %w", r.State.Name, err)
		}
	}
	if r.From == r.State.Name {
		return nil
	}
	if p.handBackOwner == nil {
		if err := ignoreNotFound(secrets.Delete(ctx, r.From, metav1.DeleteOptions{})); err != nil {
			return fmt.Errorf("delete Secret %s: %w", r.From, err)
		}
		return nil
	}
	// The running replica keeps its state Secret until the release goes;
	// it is no longer a proxy's (no parent labels), so that nothing takes
	// it for one.
	from, err := secrets.Get(ctx, r.From, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read Secret %s: %w", r.From, err)
	}
	from.Labels = map[string]string{LabelHandedBackTo: r.State.Name}
	from.OwnerReferences = append(from.OwnerReferences, *p.handBackOwner)
	if _, err := secrets.Update(ctx, from, metav1.UpdateOptions{FieldManager: adoptionManager}); err != nil {
		return fmt.Errorf("give Secret %s to the operator's Deployment: %w", r.From, err)
	}
	return nil
}

// LabelHandedBackTo is on a group replica's state Secret that a hand-back
// copied into the official one it names, and that its running replica
// keeps until the release is uninstalled.
const LabelHandedBackTo = "tailplane.dev/handed-back-to"

// handBackCerts moves the certificates of the ProxyGroups' Tailscale
// Services from Tailplane's shared Secrets into the official operator's
// (adoption.HandBackCert), so that its replicas serve them at once. A
// Secret without a certificate yet, or of a member the official operator
// keeps none for, is not carried; every one of Tailplane's ends
// (dropCertSecret).
func (p *Pipeline) handBackCerts(ctx context.Context) error {
	ns := p.d.Settings.Namespace
	secrets := p.d.Kube.CoreV1().Secrets(ns)
	certs, err := secrets.List(ctx, metav1.ListOptions{LabelSelector: tsservice.CertSelector})
	if err != nil {
		return fmt.Errorf("list the Tailscale Services' certificate Secrets: %w", err)
	}
	var errs []error
	for i := range certs.Items {
		c := &certs.Items[i]
		if official, err := p.officialCert(ctx, c); err != nil {
			p.d.Log.Info("not handing back a Tailscale Service's certificate: the official operator issues it again", "secret", c.Name, "why", err)
		} else if _, err := secrets.Create(ctx, official, metav1.CreateOptions{FieldManager: adoptionManager}); err != nil && !apierrors.IsAlreadyExists(err) {
			errs = append(errs, fmt.Errorf("create the official certificate Secret %s: %w", official.Name, err))
			continue
		}
		if err := p.dropCertSecret(ctx, c); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// dropCertSecret ends Tailplane's certificate Secret c: given to the
// operator's Deployment when the group's replicas serve on until the
// release goes (they read it), deleted otherwise.
func (p *Pipeline) dropCertSecret(ctx context.Context, c *corev1.Secret) error {
	secrets := p.d.Kube.CoreV1().Secrets(p.d.Settings.Namespace)
	if p.handBackOwner == nil {
		if err := ignoreNotFound(secrets.Delete(ctx, c.Name, metav1.DeleteOptions{})); err != nil {
			return fmt.Errorf("delete certificate Secret %s: %w", c.Name, err)
		}
		return nil
	}
	if slices.ContainsFunc(c.OwnerReferences, func(r metav1.OwnerReference) bool { return r.UID == p.handBackOwner.UID }) {
		return nil // given by an earlier hand-back
	}
	c.OwnerReferences = append(c.OwnerReferences, *p.handBackOwner)
	if _, err := secrets.Update(ctx, c, metav1.UpdateOptions{FieldManager: adoptionManager}); ignoreNotFound(err) != nil {
		return fmt.Errorf("give certificate Secret %s to the operator's Deployment: %w", c.Name, err)
	}
	return nil
}

// officialCert is the official operator's Secret of Tailplane's
// certificate Secret c: an Ingress member's, of the group it names.
func (p *Pipeline) officialCert(ctx context.Context, c *corev1.Secret) (*corev1.Secret, error) {
	kind := c.Labels[tsservice.LabelMemberKind]
	if kind != proxyset.ParentIngress {
		return nil, fmt.Errorf("the official operator keeps no certificate for a %s member", kind)
	}
	ing, err := p.d.Dyn.Resource(resources.Ingresses).Namespace(c.Labels[proxystate.LabelParentNamespace]).
		Get(ctx, c.Labels[proxystate.LabelParentName], metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("read its Ingress: %w", err)
	}
	group := ing.GetAnnotations()[annotationProxyGroup]
	if group == "" {
		return nil, errors.New("its Ingress names no ProxyGroup")
	}
	return adoption.HandBackCert(c, kind, group, p.d.Settings.Namespace)
}

// annotationProxyGroup names a member's ProxyGroup (as
// groupmember.AnnotationProxyGroup, which imports this package).
const annotationProxyGroup = "tailscale.com/proxy-group"
