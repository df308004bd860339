package official

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"
)

// AuditPolicy is the apiserver audit policy of a run with Config.Audit: one
// Metadata event per finished request of any service account (both
// operators run as one), nothing else, so that the log stays small.
const AuditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted"]
rules:
- level: Metadata
  userGroups: ["system:serviceaccounts"]
- level: None
`

// APICount is what one user asked of the API server in a time window,
// counted from the audit log.
type APICount struct {
	// Requests are all finished requests; Writes those that change
	// something (create, update, patch, delete, deletecollection).
	Requests, Writes int
	// ByCall counts requests per "verb resource[/subresource]".
	ByCall map[string]int
}

// auditEvent holds the fields of an audit.k8s.io/v1 Event that CountAudit
// reads.
type auditEvent struct {
	Stage string `json:"stage"`
	Verb  string `json:"verb"`
	User  struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	RequestReceived time.Time `json:"requestReceivedTimestamp"`
}

// CountAudit counts the requests of user received in [from, to) in an audit
// log of JSON lines. A watch counts when it ends, so the informers' watches
// opened before from count not at all.
func CountAudit(r io.Reader, user string, from, to time.Time) (APICount, error) {
	c := APICount{ByCall: map[string]int{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var ev auditEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return c, fmt.Errorf("audit log: %w", err)
		}
		if ev.Stage != "ResponseComplete" || ev.User.Username != user ||
			ev.RequestReceived.Before(from) || !ev.RequestReceived.Before(to) {
			continue
		}
		c.Requests++
		switch ev.Verb {
		case "create", "update", "patch", "delete", "deletecollection":
			c.Writes++
		}
		call := ev.Verb
		if ev.ObjectRef != nil {
			call += " " + ev.ObjectRef.Resource
			if ev.ObjectRef.Subresource != "" {
				call += "/" + ev.ObjectRef.Subresource
			}
		}
		c.ByCall[call]++
	}
	return c, sc.Err()
}

// CountAuditFile is CountAudit on the log at path.
func CountAuditFile(path, user string, from, to time.Time) (APICount, error) {
	f, err := os.Open(path)
	if err != nil {
		return APICount{}, err
	}
	defer f.Close()
	return CountAudit(f, user, from, to)
}

// PerObject says the calls per object, most frequent first, for a report
// note: "1.00 patch statefulsets, 0.50 get secrets".
func (c APICount) PerObject(objects int) string {
	type call struct {
		name string
		n    int
	}
	var calls []call
	for name, n := range c.ByCall {
		calls = append(calls, call{name, n})
	}
	sort.Slice(calls, func(i, j int) bool {
		if calls[i].n != calls[j].n {
			return calls[i].n > calls[j].n
		}
		return calls[i].name < calls[j].name
	})
	parts := make([]string, 0, len(calls))
	for _, c := range calls {
		parts = append(parts, fmt.Sprintf("%.2f %s", float64(c.n)/float64(objects), c.name))
	}
	return strings.Join(parts, ", ")
}
