package handlers_test

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tailplane/tailplane/handlers/lib/cluster"
	"github.com/tailplane/tailplane/internal/testpoll"
)

// The runtime's state ConfigMaps belong to the operator's Deployment, so
// that helm uninstall, which deletes the Deployment, leaves none behind
// (the garbage collector deletes them with it). Those written before the
// Deployment existed (by an earlier version, or by the operator run
// outside the cluster) are given to it at the next start.
func TestStateConfigMapsGoWithTheRelease(t *testing.T) {
	h := newHarness(t, nil)
	h.exposedOnline("web", "nWeb", "100.64.0.9")
	// stateOwned counts the state ConfigMaps owned by the Deployment of
	// uid ("": owned by anything).
	stateOwned := func(uid types.UID) (owned, all int, err error) {
		cms, err := h.kube.CoreV1().ConfigMaps(h.opNS).List(h.ctx(), metav1.ListOptions{LabelSelector: cluster.StateStorageSelector})
		if err != nil {
			return 0, 0, err
		}
		for i := range cms.Items {
			refs := cms.Items[i].OwnerReferences
			if (uid == "" && len(refs) > 0) || (len(refs) == 1 && refs[0].UID == uid && refs[0].Kind == "Deployment") {
				owned++
			}
		}
		return owned, len(cms.Items), nil
	}
	_, before, err := stateOwned("")
	if err != nil || before == 0 {
		t.Fatalf("no state ConfigMaps to begin with (%v)", err)
	}
	if owned, _, _ := stateOwned(""); owned != 0 {
		t.Fatalf("%d state ConfigMaps owned before there is a Deployment", owned)
	}

	dep := h.operatorDeployment()
	h.restart()
	testpoll.Until(t, settle, "state ConfigMaps given to the operator's Deployment", func() error {
		if owned, all, err := stateOwned(dep.UID); err != nil || owned != all {
			return fmt.Errorf("%d of %d state ConfigMaps owned by the Deployment (%v)", owned, all, err)
		}
		return nil
	})

	h.exposedOnline("api", "nApi", "100.64.0.10")
	testpoll.Until(t, settle, "the state written after the start owned at once", func() error {
		if owned, all, err := stateOwned(dep.UID); err != nil || all <= before || owned != all {
			return fmt.Errorf("%d of %d state ConfigMaps owned by the Deployment, %d before the second Service (%v)", owned, all, before, err)
		}
		return nil
	})
}
