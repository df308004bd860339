package runtime

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// causeSet is the set of causes one change handler runs for.
type causeSet uint16

func causesOf(cs ...Cause) causeSet {
	var s causeSet
	for _, c := range cs {
		s |= 1 << c
	}
	return s
}

func (s causeSet) has(c Cause) bool { return s&(1<<c) != 0 }

// multiCauses are the causes one On registration may combine. OnField
// (a per-field update), timers and daemons have registrations of their own.
var multiCauses = causesOf(CauseCreate, CauseUpdate, CauseDelete, CauseResume, CauseEnqueue)

// Causes sets the causes an On registration runs for: any of CauseCreate,
// CauseUpdate, CauseDelete, CauseResume and CauseEnqueue.
func Causes(cs ...Cause) Option {
	return func(h *handler) {
		for _, c := range cs {
			if !multiCauses.has(c) {
				h.optErrs = append(h.optErrs, fmt.Errorf("cause %s cannot be combined (only create, update, delete, resume, enqueue)", c))
				continue
			}
			h.causes |= causesOf(c)
		}
	}
}

// On registers fn once for several causes, given with Causes:
//
//	op.On(gvr, "sync", fn, runtime.Causes(runtime.CauseCreate, runtime.CauseUpdate, runtime.CauseResume))
//
// It is one handler: one id, one progress record, and at most one run per
// cycle. When several of its causes hold at once, Event.Cause is the first
// of create, update, resume, enqueue (a cycle of a deleted object has only
// delete, or resume with IncludeDeleted). With CauseDelete it holds the
// finalizer like OnDelete (unless Optional).
func (o *Operator) On(gvr schema.GroupVersionResource, id string, fn HandlerFunc, opts ...Option) error {
	return o.register(&handler{kind: kindChange, gvr: gvr, id: id, fn: fn}, opts)
}
