package plugin

import (
	"testing"
	"time"
)

func TestNotFoundRetryDoublesToAMinute(t *testing.T) {
	want := []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second, 40 * time.Second, time.Minute, time.Minute}
	for retry, w := range want {
		if got := notFoundRetry(retry); got != w {
			t.Errorf("notFoundRetry(%d) = %s, want %s", retry, got, w)
		}
	}
	if got := notFoundRetry(1000); got != time.Minute {
		t.Errorf("notFoundRetry(1000) = %s, want 1m", got)
	}
}
