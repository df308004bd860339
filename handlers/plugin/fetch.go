package plugin

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tailplane/tailplane/plugins/remote"
	"github.com/tailplane/tailplane/plugins/source"
)

// fetchTimeout bounds one fetch from a registry or URL.
const fetchTimeout = 2 * time.Minute

// fetched is a verified module and where it came from.
type fetched struct {
	module []byte
	sum    string
	// origin says what was read: the registry's repository@digest, the
	// URL, the ConfigMap or Secret, or the cluster's copy.
	origin string
	// cached: the module is the cluster's copy; no registry was asked.
	cached bool
}

// fetch returns rp's module, its size and digest checked (the pin before
// anything compiles it). A refusal returns its reason; an error without
// one is the cluster's, retried. With pull policy IfNotPresent a module
// the cluster already holds (pinned by spec.module.sha256, or the digest
// last fetched from the same source) is read from the operator's copy:
// a registry is asked once per digest per cluster, whatever restarts.
func (m *module) fetch(ctx context.Context, rp *RoutingPlugin) (fetched, string, error) {
	if !rp.Remote() {
		mod, sum, err := source.Fetch(ctx, m.d.Kube, rp.Source())
		if reason := reasonOf(err); reason != "" || err != nil {
			return fetched{}, reason, err
		}
		return fetched{module: mod, sum: sum, origin: rp.Source().String()}, "", nil
	}
	if rp.PullPolicy() == PullIfNotPresent {
		pin := strings.ToLower(rp.Spec.Module.SHA256)
		if pin == "" && rp.Status.Source == rp.SourceString() {
			pin = rp.Status.SHA256
		}
		if pin != "" {
			mod, err := m.readCopy(ctx, pin, rp.MaxSize())
			if err != nil {
				return fetched{}, "", err
			}
			if mod != nil {
				return fetched{module: mod, sum: pin, origin: "the cluster's copy of sha256 " + pin, cached: true}, "", nil
			}
		}
	}
	opts := remote.Options{SHA256: strings.ToLower(rp.Spec.Module.SHA256), MaxSize: rp.MaxSize()}
	fctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	var got remote.Module
	var err error
	if o := rp.Spec.Module.OCI; o != nil {
		if o.ImagePullSecret != "" {
			cfg, reason, err := m.pullSecret(ctx, rp.Namespace, o.ImagePullSecret)
			if err != nil {
				return fetched{}, reason, err
			}
			opts.DockerConfig = cfg
		}
		got, err = remote.FetchOCI(fctx, o.Ref, opts)
	} else {
		got, err = remote.FetchHTTPS(fctx, rp.Spec.Module.HTTPS.URL, opts)
	}
	if err != nil {
		reason := reasonOf(err)
		if reason == "" {
			reason = ReasonFetchFailed
		}
		return fetched{}, reason, err
	}
	return fetched{module: got.Bytes, sum: got.SHA256, origin: got.Origin}, "", nil
}

// pullSecret reads the Docker config of an imagePullSecret in namespace.
// Its content is never logged or put in a status.
func (m *module) pullSecret(ctx context.Context, namespace, name string) ([]byte, string, error) {
	s, err := m.d.Kube.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, ReasonPullSecretNotFound, fmt.Errorf("imagePullSecret %s/%s does not exist", namespace, name)
	}
	if err != nil {
		return nil, "", fmt.Errorf("read imagePullSecret %s/%s: %w", namespace, name, err)
	}
	for _, key := range []string{corev1.DockerConfigJsonKey, corev1.DockerConfigKey} {
		if b, ok := s.Data[key]; ok {
			return b, "", nil
		}
	}
	return nil, ReasonPullSecretNotFound, fmt.Errorf("imagePullSecret %s/%s has neither %s nor %s (type kubernetes.io/dockerconfigjson)", namespace, name, corev1.DockerConfigJsonKey, corev1.DockerConfigKey)
}

// reasonOf maps a fetch error to the Accepted reason; "" for errors that
// are the cluster's (retried) and nil.
func reasonOf(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, source.ErrNotFound):
		return ReasonSourceNotFound
	case errors.Is(err, source.ErrSHA256Mismatch):
		return ReasonSHA256Mismatch
	case errors.Is(err, source.ErrTooLarge):
		return ReasonModuleTooLarge
	case errors.Is(err, source.ErrBadGzip):
		return ReasonInvalidModule
	case errors.Is(err, remote.ErrNotWasm):
		return ReasonNotWasm
	case errors.Is(err, remote.ErrUnauthorized):
		return ReasonPullUnauthorized
	case errors.Is(err, remote.ErrUnreachable), errors.Is(err, context.DeadlineExceeded):
		return ReasonSourceUnreachable
	}
	return ""
}
