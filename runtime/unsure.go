package runtime

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// confirmTimeout bounds the read that settles whether a write of unknown
// outcome landed.
const confirmTimeout = 10 * time.Second

// outcomeUnknown reports whether a failed write may still have been
// applied: the request reached (or may have reached) the API server but no
// definite answer came back, as with a reset connection, a timeout or a
// 5xx. A 4xx other than 408 is a definite refusal: nothing was written.
func outcomeUnknown(err error) bool {
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		code := st.Status().Code
		return code == 0 || code == http.StatusRequestTimeout || code >= 500
	}
	return true
}

// markUnsure remembers that a write computed from obj's resourceVersion
// ended without a definite answer. Until that is settled the cached copy
// cannot be trusted: if the write landed, handlers whose success it
// recorded would run again on the copy from before it.
func (o *Operator) markUnsure(k Key, obj *unstructured.Unstructured) {
	o.stateMu.Lock()
	o.unsure[k] = obj.GetResourceVersion()
	o.stateMu.Unlock()
}

// settleUnsure is called before a cycle on a key whose last write has an
// unknown outcome. It reads the object from the API server: when the
// server holds a newer version than the cache (the write landed, or
// someone else wrote), the key waits for the informer to deliver it, as
// after an own patch; when both agree, the write did not land and the
// cycle goes on (hold false). A failed read keeps the mark and returns an
// error, so the key is retried with backoff and no handler runs meanwhile.
func (o *Operator) settleUnsure(ctx context.Context, k Key, cached *unstructured.Unstructured) (wait time.Duration, hold bool, err error) {
	o.stateMu.Lock()
	before, ok := o.unsure[k]
	o.stateMu.Unlock()
	if !ok {
		return 0, false, nil
	}
	ctx, cancel := context.WithTimeout(ctx, confirmTimeout)
	defer cancel()
	fresh, err := o.dyn.Resource(k.Resource).Namespace(k.Namespace).Get(ctx, k.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		// Gone: the informer's delete event handles the key next.
		o.forgetUnsure(k)
		return o.settings.ConsistencyTimeout, true, nil
	case err != nil:
		return 0, true, fmt.Errorf("read %s to learn whether its last patch landed: %w", k, err)
	}
	o.forgetUnsure(k)
	if fresh.GetResourceVersion() == cached.GetResourceVersion() {
		return 0, false, nil
	}
	o.objectLogger(k).Debug("the cache predates the API server's copy after a write of unknown outcome; waiting for the informer",
		"written_from", before, "cached", cached.GetResourceVersion(), "server", fresh.GetResourceVersion())
	o.markStale(k, cached.GetResourceVersion(), fresh.GetResourceVersion())
	return o.settings.ConsistencyTimeout, true, nil
}

func (o *Operator) forgetUnsure(k Key) {
	o.stateMu.Lock()
	delete(o.unsure, k)
	o.stateMu.Unlock()
}
