package chart_test

import (
	"context"
	"reflect"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/yaml"

	"github.com/tailplane/tailplane/deploy/chart"
)

// uninstallHook renders the chart with vals and returns its pre-delete
// Job, nil when there is none.
func uninstallHook(t *testing.T, vals map[string]any) *batchv1.Job {
	t.Helper()
	rel, err := chart.Render(context.Background(), chart.Namespace, vals)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range rel.Hooks {
		if h.Name != "operator-uninstall" {
			continue
		}
		job := &batchv1.Job{}
		if err := yaml.Unmarshal([]byte(h.Manifest), job); err != nil {
			t.Fatalf("hook YAML: %v\n%s", err, h.Manifest)
		}
		return job
	}
	return nil
}

// helm uninstall first runs a Job, as the operator's service account, that
// runs the operator with TAILPLANE_UNINSTALL=true and otherwise the
// Deployment's settings and credentials (extraEnv included), so that it
// deletes the operator's device; operatorConfig.deleteDeviceOnUninstall
// false leaves the device.
func TestUninstallHookDeletesTheDevice(t *testing.T) {
	for _, vals := range []map[string]any{
		seedValues(t, "operatorConfig.extraEnv[0].name=OPERATOR_LOGGING", "operatorConfig.extraEnv[0].value=debug"),
		{"headscale": map[string]any{"url": "https://hs.example.com", "apiKey": "hskey-api-x"}},
	} {
		job := uninstallHook(t, vals)
		if job == nil {
			t.Fatalf("no uninstall hook with %v", vals)
		}
		if job.Annotations["helm.sh/hook"] != "pre-delete" || job.Spec.Template.Spec.ServiceAccountName != "operator" {
			t.Errorf("hook annotations %v, service account %q", job.Annotations, job.Spec.Template.Spec.ServiceAccountName)
		}
		d := render(t, vals).deployment(t)
		c, op := job.Spec.Template.Spec.Containers[0], d.Spec.Template.Spec.Containers[0]
		if c.Image != op.Image {
			t.Errorf("hook image %q, operator %q", c.Image, op.Image)
		}
		last := c.Env[len(c.Env)-1]
		if last.Name != "TAILPLANE_UNINSTALL" || last.Value != "true" || !reflect.DeepEqual(c.Env[:len(c.Env)-1], op.Env) {
			t.Errorf("hook env %v, want the operator's %v and TAILPLANE_UNINSTALL=true", c.Env, op.Env)
		}
		for _, m := range c.VolumeMounts {
			if v := volume(job.Spec.Template.Spec.Volumes, m.Name); v == nil || !reflect.DeepEqual(v, volume(d.Spec.Template.Spec.Volumes, m.Name)) {
				t.Errorf("hook volume %s is not the operator's: %+v", m.Name, v)
			}
		}
		if len(c.VolumeMounts) == 0 {
			t.Error("the hook mounts no credentials")
		}
	}
	if job := uninstallHook(t, seedValues(t, "operatorConfig.deleteDeviceOnUninstall=false")); job != nil {
		t.Fatal("an uninstall hook with deleteDeviceOnUninstall=false")
	}
}

// After a hand-back (operatorConfig.handBack) the operator's device is the
// one the official operator takes back: no uninstall hook deletes it, and
// the operator runs with OPERATOR_HAND_BACK.
func TestHandBackKeepsTheOperatorsDevice(t *testing.T) {
	vals := seedValues(t, "operatorConfig.handBack=true")
	if job := uninstallHook(t, vals); job != nil {
		t.Fatal("an uninstall hook after a hand-back")
	}
	var found bool
	for _, e := range render(t, vals).deployment(t).Spec.Template.Spec.Containers[0].Env {
		found = found || e.Name == "OPERATOR_HAND_BACK" && e.Value == "true"
	}
	if !found {
		t.Error("no OPERATOR_HAND_BACK=true in the operator's env")
	}
	for _, e := range render(t, seedValues(t)).deployment(t).Spec.Template.Spec.Containers[0].Env {
		if e.Name == "OPERATOR_HAND_BACK" {
			t.Errorf("OPERATOR_HAND_BACK=%s without a hand-back", e.Value)
		}
	}
}
