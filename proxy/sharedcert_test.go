package proxy

import (
	"crypto/tls"
	"testing"
	"time"
)

// The issuing replica re-issues only what needs it: a missing, foreign or
// expired certificate at once, a valid one once less than a third of its
// lifetime is left, and otherwise looks again at the renewal time (at
// most an hour away).
func TestNeedsIssue(t *testing.T) {
	ca := newTestCA(t)
	const domain = "web.tail-test.ts.net"
	load := func(name string, lifetime time.Duration) *loadedCert {
		crt, key, _, err := ca.issue(name, lifetime)
		if err != nil {
			t.Fatal(err)
		}
		c, err := tls.X509KeyPair(crt, key)
		if err != nil {
			t.Fatal(err)
		}
		return &loadedCert{cert: &c}
	}
	now := time.Now()
	fresh := load(domain, 90*24*time.Hour) // issued an hour ago
	if issue, next := needsIssue(fresh, domain, now); issue || next != issueRecheck {
		t.Errorf("fresh certificate: issue %v, next check in %v; want no issue, check in %v", issue, next, issueRecheck)
	}
	renewAt := fresh.cert.Leaf.NotAfter.Add(-30 * 24 * time.Hour)
	if issue, next := needsIssue(fresh, domain, renewAt.Add(-10*time.Minute)); issue || next != 10*time.Minute {
		t.Errorf("ten minutes before renewal: issue %v, next %v; want no issue, check in 10m", issue, next)
	}
	if issue, _ := needsIssue(fresh, domain, renewAt.Add(time.Minute)); !issue {
		t.Error("a certificate with less than a third of its lifetime left is not renewed")
	}
	if issue, _ := needsIssue(fresh, domain, fresh.cert.Leaf.NotAfter.Add(time.Minute)); !issue {
		t.Error("an expired certificate is not re-issued")
	}
	if issue, _ := needsIssue(load("other.tail-test.ts.net", 90*24*time.Hour), domain, now); !issue {
		t.Error("a certificate for another name is not replaced")
	}
	if issue, _ := needsIssue(&loadedCert{err: errNotGranted}, domain, now); !issue {
		t.Error("an empty Secret does not get a certificate")
	}
}
