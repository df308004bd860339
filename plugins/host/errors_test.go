package host

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/tetratelabs/wazero/sys"
)

// A guest that ran out of time is worth another try; a bad module is not.
func TestIsDeadline(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("plugin x: instantiate: %w", errDeadline), true},
		{fmt.Errorf("wrapped: %w", context.DeadlineExceeded), true},
		{sys.NewExitError(sys.ExitCodeContextCanceled), true},
		{fmt.Errorf("plugin x: %w", ErrNotWasm), false},
		{sys.NewExitError(1), false},
		{errors.New("other"), false},
	} {
		if got := IsDeadline(c.err); got != c.want {
			t.Errorf("IsDeadline(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
