package official

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/charmbracelet/log"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/tailplane/tailplane/deploy/chart"
)

// The way back (-migrate -back, issue 37): after the switch to Tailplane,
// under the same load, Tailplane hands every proxy back
// (operatorConfig.handBack), its release is uninstalled keeping the CRDs,
// and the official chart is installed again (docs/migration.md, "Going
// back").

// tailplaneSelector selects Tailplane's proxy objects.
const tailplaneSelector = "tailplane.dev/proxy-role"

// handBackToOfficial replaces Tailplane with the official operator, and
// says how long each step took.
func (e *Env) handBackToOfficial(ctx context.Context, logger *log.Logger, r *MigrateReport) error {
	kube := e.Cluster.Kube
	// 1. The hand-back: the operator restarts in hand-back mode, and is
	// ready once every proxy is handed back.
	start := time.Now()
	values := map[string]any{"operatorConfig": map[string]any{"logging": "dev", "handBack": true}}
	if _, err := e.installTailplane(ctx, values); err != nil {
		return fmt.Errorf("hand back: %w", err)
	}
	r.HandBack = time.Since(start)
	// Its proxies serve on, given to the operator's Deployment; their
	// state is in the official layout.
	if l, err := kube.CoreV1().Secrets(MigrateNamespace).List(ctx, metav1.ListOptions{LabelSelector: tailplaneSelector + ",tailscale.com/secret-type=state"}); err != nil || len(l.Items) > 0 {
		return fmt.Errorf("after the hand-back: %d of Tailplane's state Secrets left (%v)", len(l.Items), err)
	}
	logger.Info("Tailplane handed its proxies back", "took", r.HandBack.Round(time.Millisecond))
	// 2. The CRDs leave Tailplane's release, kept; the release goes (its
	// uninstall hook keeps the operator's device after a hand-back).
	keep := []byte(`{"metadata":{"annotations":{"helm.sh/resource-policy":"keep"}}}`)
	for _, name := range e.officialCRDs {
		if _, err := e.Cluster.Dyn.Resource(crdResource).Patch(ctx, name, types.MergePatchType, keep, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("keep CRD %s: %w", name, err)
		}
	}
	values["installCRDs"] = false
	if _, err := e.installTailplane(ctx, values); err != nil {
		return fmt.Errorf("helm upgrade --set installCRDs=false: %w", err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(e.dir, "kubeconfig"))
	if err != nil {
		return err
	}
	start = time.Now()
	if err := chart.Uninstall(ctx, cfg, OfficialRelease, MigrateNamespace, chart.Options{Timeout: 3 * time.Minute}); err != nil {
		return fmt.Errorf("uninstall Tailplane: %w", err)
	}
	err = Poll(ctx, 2*time.Minute, 250*time.Millisecond, func() (bool, error) {
		pods, err := kube.CoreV1().Pods(MigrateNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=tailplane-operator"})
		return err == nil && len(pods.Items) == 0, err
	}, "Tailplane's operator Pod gone")
	if err != nil {
		return err
	}
	// The garbage collector stopped Tailplane's proxies with the release.
	err = Poll(ctx, 2*time.Minute, 250*time.Millisecond, func() (bool, error) {
		pods, err := kube.CoreV1().Pods(MigrateNamespace).List(ctx, metav1.ListOptions{LabelSelector: tailplaneSelector})
		return err == nil && len(pods.Items) == 0, err
	}, "Tailplane's proxy Pods gone with its release")
	if err != nil {
		return err
	}
	if _, err := kube.CoreV1().Secrets(MigrateNamespace).Get(ctx, "operator", metav1.GetOptions{}); err != nil {
		r.Notes = append(r.Notes, fmt.Sprintf("the operator's state Secret did not outlive Tailplane's uninstall: %v", err))
	}
	r.UninstallTailplane = time.Since(start)
	// devinstall enforces the restricted Pod Security level on the
	// namespace, as Tailplane's operator and proxies run under it; the
	// official operator's Pods do not (its operator container sets no
	// securityContext, its proxies run a privileged init container), so
	// the label goes first (docs/migration.md).
	unlabel := []byte(`{"metadata":{"labels":{"pod-security.kubernetes.io/enforce":null,"pod-security.kubernetes.io/warn":null}}}`)
	if _, err := kube.CoreV1().Namespaces().Patch(ctx, MigrateNamespace, types.MergePatchType, unlabel, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("lift the namespace's Pod Security level: %w", err)
	}
	// 3. The official chart, its CRDs left out (they are there).
	start = time.Now()
	official := e.officialValues()
	official["installCRDs"] = false
	if _, err := InstallChart(ctx, filepath.Join(e.dir, "kubeconfig"), filepath.Join(e.Cfg.Work, "official-chart"), MigrateNamespace, OfficialRelease, official, 3*time.Minute, nil); err != nil {
		return fmt.Errorf("install the official chart again: %w", err)
	}
	r.Reinstall = time.Since(start)
	logger.Info("official operator installed in Tailplane's place", "uninstall", r.UninstallTailplane.Round(time.Millisecond), "install", r.Reinstall.Round(time.Millisecond))
	return nil
}
