package main

import (
	"context"
	"fmt"
	"time"

	"github.com/charmbracelet/log"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/tailplane/tailplane/internal/kubestate"
	"github.com/tailplane/tailplane/internal/tailnet"
)

// envUninstall, set to true, makes the process remove the operator's own
// tailnet device and its state Secret, then exit: the chart's pre-delete
// hook (helm uninstall) runs it, so that the device does not outlive the
// release and a later install joins as a new device under its hostname
// rather than a second one with a suffix.
const envUninstall = "TAILPLANE_UNINSTALL"

// uninstallTimeout bounds the removal: helm uninstall waits for the hook.
const uninstallTimeout = time.Minute

// uninstallWanted reads envUninstall.
func uninstallWanted(getenv func(string) string) (bool, error) {
	return boolEnv(getenv, envUninstall, false)
}

// forgetDevice deletes the device whose state Secret namespace/name holds
// (its stable node ID) from the tailnet, then the Secret. Nothing to
// delete (no Secret, or a state with no node) is not an error, so that the
// hook can run again.
func forgetDevice(ctx context.Context, kube kubernetes.Interface, backend tailnet.Backend, namespace, name string, logger *log.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, uninstallTimeout)
	defer cancel()
	if name == "" {
		logger.Info("no state Secret (OPERATOR_SECRET is empty): the operator's device left with its last process")
		return nil
	}
	secrets := kube.CoreV1().Secrets(namespace)
	if _, err := secrets.Get(ctx, name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		logger.Info("no state Secret: nothing to remove", "secret", namespace+"/"+name)
		return nil
	} else if err != nil {
		return fmt.Errorf("read the operator's state Secret %s/%s: %w", namespace, name, err)
	}
	st, err := kubestate.New(ctx, kube, namespace, name)
	if err != nil {
		return err
	}
	id, err := storedNodeID(st)
	if err != nil {
		return fmt.Errorf("read the device state in Secret %s/%s: %w", namespace, name, err)
	}
	if id != "" {
		if err := backend.DeleteDevice(ctx, id); err != nil {
			return fmt.Errorf("delete the operator's tailnet device %s: %w", id, err)
		}
		logger.Info("deleted the operator's tailnet device", "nodeID", id, "loginServer", backend.LoginServer())
	}
	if err := secrets.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete the operator's state Secret %s/%s: %w", namespace, name, err)
	}
	logger.Info("deleted the operator's state Secret", "secret", namespace+"/"+name)
	return nil
}
