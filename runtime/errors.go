package runtime

import (
	"errors"
	"fmt"
	"time"
)

// ErrRetriesExceeded is wrapped by the failure of a handler that used up the
// attempts allowed by Retries.
var ErrRetriesExceeded = errors.New("retries exceeded")

// ErrTimeout is wrapped by the failure of a handler that ran longer, in total
// since its first attempt, than its Timeout.
var ErrTimeout = errors.New("handler timed out")

// TemporaryError asks for the handler to be retried after Delay.
type TemporaryError struct {
	Err   error
	Delay time.Duration
}

func (e *TemporaryError) Error() string {
	return fmt.Sprintf("temporary (retry in %s): %v", e.Delay, e.Err)
}

func (e *TemporaryError) Unwrap() error { return e.Err }

// PermanentError ends the handler for good for the current cause: it is not
// retried, an Event of type Warning is posted and the cycle goes on.
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return "permanent: " + e.Err.Error() }

func (e *PermanentError) Unwrap() error { return e.Err }

// Temporary marks err as retryable after delay (Kopf's TemporaryError).
func Temporary(err error, delay time.Duration) error {
	if err == nil {
		err = errors.New("retry requested")
	}
	return &TemporaryError{Err: err, Delay: delay}
}

// Permanent marks err as final: the handler is not run again for this cause.
func Permanent(err error) error {
	if err == nil {
		err = errors.New("permanent failure")
	}
	return &PermanentError{Err: err}
}
