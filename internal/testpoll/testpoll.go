// Package testpoll is how tests wait: they poll a check with Gomega's
// Eventually until it passes or a deadline expires, and fail with what they
// waited for and the check's last error. Tests never sleep a fixed time; a
// condition that must keep holding is checked with Always (Gomega's
// Consistently) instead.
//
// It gives the tests of every package one short form of those two Gomega
// calls with one polling interval. It imports only Gomega and the standard
// library; only _test.go files import it.
package testpoll

import (
	"errors"
	"testing"
	"time"

	"github.com/onsi/gomega"
)

// interval is how often a check runs: short enough for in-memory
// conditions, long enough not to hammer an API server during a long wait.
const interval = 20 * time.Millisecond

// Until polls check until it returns nil; after timeout it fails tb with
// what and check's last error.
func Until(tb testing.TB, timeout time.Duration, what string, check func() error) {
	tb.Helper()
	gomega.NewWithT(tb).Eventually(check).WithTimeout(timeout).WithPolling(interval).
		Should(gomega.Succeed(), "waiting for %s", what)
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
	gomega.NewWithT(tb).Consistently(check).WithTimeout(d).WithPolling(interval).
		Should(gomega.Succeed(), "%s stopped holding", what)
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
