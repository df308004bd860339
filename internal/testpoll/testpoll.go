// Package testpoll is how tests wait: they poll a check until it passes or a
// deadline expires, and fail with what they waited for and the check's last
// error. Tests never sleep a fixed time; a condition that must keep holding
// is checked with Always instead.
//
// The interval starts at 5 ms (in-memory conditions settle fast) and doubles
// up to 100 ms, so a long wait on the API server does not hammer it.
//
// It imports only the standard library; only _test.go files import it.
package testpoll

import (
	"errors"
	"testing"
	"time"
)

const (
	firstInterval = 5 * time.Millisecond
	maxInterval   = 100 * time.Millisecond
)

// Until polls check until it returns nil; after timeout it fails tb with
// what and check's last error.
func Until(tb testing.TB, timeout time.Duration, what string, check func() error) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	interval := firstInterval
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %s waiting for %s: %v", timeout, what, err)
		}
		<-time.After(interval)
		interval = min(2*interval, maxInterval)
	}
}

// UntilTrue polls cond until it holds; after timeout it fails tb with what.
func UntilTrue(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	Until(tb, timeout, what, boolCheck(cond))
}

// Always checks that check keeps returning nil for d, failing tb with what
// and the error as soon as it does not.
func Always(tb testing.TB, d time.Duration, what string, check func() error) {
	tb.Helper()
	end := time.Now().Add(d)
	interval := firstInterval
	for {
		if err := check(); err != nil {
			tb.Fatalf("%s stopped holding: %v", what, err)
		}
		if time.Now().After(end) {
			return
		}
		<-time.After(interval)
		interval = min(2*interval, maxInterval)
	}
}

// AlwaysTrue checks that cond keeps holding for d.
func AlwaysTrue(tb testing.TB, d time.Duration, what string, cond func() bool) {
	tb.Helper()
	Always(tb, d, what, boolCheck(cond))
}

func boolCheck(cond func() bool) func() error {
	return func() error {
		if cond() {
			return nil
		}
		return errors.New("condition still false")
	}
}
