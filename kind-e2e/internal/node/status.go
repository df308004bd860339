package node

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// buildStatus computes the pod status from the containers; pw.mu is held.
func (pw *podWorker) buildStatus() corev1.PodStatus {
	old := pw.pod.Status
	st := corev1.PodStatus{
		HostIP:    NodeIP,
		HostIPs:   []corev1.HostIP{{IP: NodeIP}},
		PodIP:     pw.ip,
		PodIPs:    []corev1.PodIP{{IP: pw.ip}},
		StartTime: old.StartTime,
		QOSClass:  old.QOSClass,
	}
	if st.StartTime == nil {
		now := metav1.Now()
		st.StartTime = &now
	}
	for _, cs := range pw.inits {
		st.InitContainerStatuses = append(st.InitContainerStatuses, containerStatus(cs))
	}
	allReady, allRunning, anyWaitingImage := true, true, false
	terminated, failed := 0, 0
	for _, cs := range pw.containers {
		s := containerStatus(cs)
		st.ContainerStatuses = append(st.ContainerStatuses, s)
		allReady = allReady && s.Ready
		allRunning = allRunning && s.State.Running != nil
		if s.State.Waiting != nil && s.State.Waiting.Reason == ErrImageNotKnown {
			anyWaitingImage = true
		}
		if t := s.State.Terminated; t != nil {
			terminated++
			if t.ExitCode != 0 {
				failed++
			}
		}
	}
	switch {
	case terminated == len(pw.containers) && pw.pod.Spec.RestartPolicy != corev1.RestartPolicyAlways && len(pw.containers) > 0:
		st.Phase = corev1.PodSucceeded
		if failed > 0 {
			st.Phase = corev1.PodFailed
		}
	case pw.initsDone && (allRunning || terminated > 0 || anyRunning(pw.containers)):
		st.Phase = corev1.PodRunning
	default:
		st.Phase = corev1.PodPending
	}
	ready := allReady && st.Phase == corev1.PodRunning
	podReadyMsg := ""
	if !ready {
		podReadyMsg = "containers with unready status"
	}
	initReason := ""
	if !pw.initsDone {
		initReason = "ContainersNotInitialized"
	}
	if anyWaitingImage {
		podReadyMsg = "a container's image is not in devcluster's image map"
	}
	if pw.podErr != "" {
		podReadyMsg = pw.podErr
	}
	st.Conditions = []corev1.PodCondition{
		condition(old, corev1.PodScheduled, true, "", ""),
		condition(old, corev1.PodReadyToStartContainers, pw.initsDone || anyRunning(pw.inits), "", ""),
		condition(old, corev1.PodInitialized, pw.initsDone, initReason, ""),
		condition(old, corev1.ContainersReady, ready, reasonIf(!ready, "ContainersNotReady"), podReadyMsg),
		condition(old, corev1.PodReady, ready, reasonIf(!ready, "ContainersNotReady"), podReadyMsg),
	}
	return st
}

func anyRunning(cs []*containerState) bool {
	for _, c := range cs {
		if c.state.Running != nil {
			return true
		}
	}
	return false
}

func reasonIf(b bool, r string) string {
	if b {
		return r
	}
	return ""
}

func containerStatus(cs *containerState) corev1.ContainerStatus {
	started := cs.state.Running != nil
	s := corev1.ContainerStatus{
		Name:                 cs.spec.Name,
		Image:                cs.spec.Image,
		ImageID:              "",
		Ready:                cs.ready && cs.state.Running != nil,
		Started:              &started,
		RestartCount:         cs.restartCount,
		State:                cs.state,
		LastTerminationState: cs.lastState,
	}
	if cs.pid != 0 {
		s.ContainerID = "process://" + strconv.Itoa(cs.pid)
	}
	return s
}

// condition keeps LastTransitionTime when the status did not change.
func condition(old corev1.PodStatus, t corev1.PodConditionType, ok bool, reason, msg string) corev1.PodCondition {
	status := corev1.ConditionFalse
	if ok {
		status = corev1.ConditionTrue
	}
	c := corev1.PodCondition{Type: t, Status: status, Reason: reason, Message: msg, LastTransitionTime: metav1.Now()}
	for _, o := range old.Conditions {
		if o.Type == t && o.Status == status {
			c.LastTransitionTime = o.LastTransitionTime
		}
	}
	return c
}
