package official

import (
	"strings"
	"testing"
	"time"
)

// Only the user's finished requests received in the window count; writes
// are told apart, and calls are named by verb and resource.
func TestCountAudit(t *testing.T) {
	const op = "system:serviceaccount:tailscale:operator"
	log := strings.Join([]string{
		`{"stage":"ResponseComplete","verb":"patch","user":{"username":"` + op + `"},"objectRef":{"resource":"statefulsets"},"requestReceivedTimestamp":"2026-12-07T10:00:01.000000Z"}`,
		`{"stage":"ResponseComplete","verb":"list","user":{"username":"` + op + `"},"objectRef":{"resource":"secrets"},"requestReceivedTimestamp":"2026-12-07T10:00:02.000000Z"}`,
		`{"stage":"ResponseComplete","verb":"patch","user":{"username":"` + op + `"},"objectRef":{"resource":"services","subresource":"status"},"requestReceivedTimestamp":"2026-12-07T10:00:03.000000Z"}`,
		// another user, another stage, outside the window
		`{"stage":"ResponseComplete","verb":"patch","user":{"username":"system:serviceaccount:tailscale-official:operator"},"objectRef":{"resource":"statefulsets"},"requestReceivedTimestamp":"2026-12-07T10:00:01.000000Z"}`,
		`{"stage":"ResponseStarted","verb":"watch","user":{"username":"` + op + `"},"objectRef":{"resource":"secrets"},"requestReceivedTimestamp":"2026-12-07T10:00:01.000000Z"}`,
		`{"stage":"ResponseComplete","verb":"watch","user":{"username":"` + op + `"},"objectRef":{"resource":"secrets"},"requestReceivedTimestamp":"2026-12-07T09:59:00.000000Z"}`,
		`{"stage":"ResponseComplete","verb":"get","user":{"username":"` + op + `"},"objectRef":{"resource":"secrets"},"requestReceivedTimestamp":"2026-12-07T10:00:10.000000Z"}`,
	}, "\n") + "\n"
	from := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	c, err := CountAudit(strings.NewReader(log), op, from, from.Add(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if c.Requests != 3 || c.Writes != 2 {
		t.Errorf("requests %d, writes %d; want 3 and 2", c.Requests, c.Writes)
	}
	if got, want := c.PerObject(2), "0.50 list secrets, 0.50 patch services/status, 0.50 patch statefulsets"; got != want {
		t.Errorf("PerObject = %q, want %q", got, want)
	}
	if _, err := CountAudit(strings.NewReader("not json\n"), op, from, from); err == nil {
		t.Error("a line that is not JSON gave no error")
	}
}
