package tslog

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/charmbracelet/log"
	"k8s.io/klog/v2"
)

// lines returns the records written, failing on any control byte.
func lines(t *testing.T, buf *bytes.Buffer) []string {
	t.Helper()
	for _, b := range buf.Bytes() {
		if (b < 0x20 && b != '\n' && b != '\t') || b == 0x7f {
			t.Fatalf("control byte %#x in the log:\n%q", b, buf.String())
		}
	}
	out := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(out) == 1 && out[0] == "" {
		return nil
	}
	return out
}

// Lines as tsnet writes them: a structured record with its NUL marker, a
// verbose one, a multi-line netmap diff, a user-facing line. Each becomes
// one clean record at its level.
func TestTsnetLinesAreOneCleanRecordEach(t *testing.T) {
	var buf bytes.Buffer
	l := New(&buf, false)
	l.SetLevel(log.DebugLevel)
	ts := NewTsnet(l, true)
	ts.Logf("[v\x00JSON]1{\"Hostinfo\":{\"OS\":\"linux\"}}")
	ts.Logf("[v1] magicsock: disco key = %s", "d:1234")
	ts.Logf("netmap diff:\n  -peer a (100.64.0.1)\n  +peer b (100.64.0.2)\n")
	ts.Logf("wgengine: \x01odd\x7f byte")
	ts.UserLogf("To authenticate, visit:\n\n\thttps://login.example/a/1\n")
	got := lines(t, &buf)
	want := []struct{ level, has string }{
		{"DEBU", `{"Hostinfo":{"OS":"linux"}} component=tsnet v=1 json=true`},
		{"DEBU", "magicsock: disco key = d:1234 component=tsnet v=1"},
		{"DEBU", "netmap diff: | -peer a (100.64.0.1) | +peer b (100.64.0.2) component=tsnet"},
		{"DEBU", "wgengine: odd byte component=tsnet"},
		{"INFO", "To authenticate, visit: | https://login.example/a/1 component=tsnet"},
	}
	if len(got) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(got), len(want), buf.String())
	}
	for i, w := range want {
		if !strings.Contains(got[i], " "+w.level+" ") || !strings.Contains(got[i], w.has) {
			t.Errorf("line %d = %q, want level %s and %q", i, got[i], w.level, w.has)
		}
	}
}

// tsnet's internal log is behind its own level: a binary at debug level
// does not show it unless TAILPLANE_TSNET_LOG_LEVEL=debug; the user-facing
// lines show at info.
func TestTsnetInternalLogHasItsOwnLevel(t *testing.T) {
	var buf bytes.Buffer
	l := New(&buf, false)
	l.SetLevel(log.DebugLevel)
	ts := NewTsnet(l, false)
	ts.Logf("magicsock: endpoints changed")
	ts.UserLogf("AuthLoop: state is Running")
	l.Debug("our own debug line")
	got := lines(t, &buf)
	if len(got) != 2 || !strings.Contains(got[0], "AuthLoop: state is Running") || !strings.Contains(got[1], "our own debug line") {
		t.Fatalf("got %q, want the user line and our debug line only", got)
	}
	s, err := FromEnv(func(k string) string { return map[string]string{EnvTsnetLevel: "debug", EnvFormat: "json"}[k] })
	if err != nil || !s.TsnetDebug || !s.JSON {
		t.Fatalf("FromEnv = %+v, %v; want TsnetDebug and JSON", s, err)
	}
	if _, err := FromEnv(func(k string) string { return map[string]string{EnvFormat: "xml"}[k] }); err == nil || !strings.Contains(err.Error(), EnvFormat) {
		t.Fatalf("FromEnv with format xml: %v, want an error naming %s", err, EnvFormat)
	}
}

// Our own records stay on one line too: a multi-line message or value (an
// errors.Join) is joined, in text and in JSON.
func TestOwnMultiLineRecordsStayOnOneLine(t *testing.T) {
	var buf bytes.Buffer
	l := New(&buf, false)
	l.Error("config refused\nsecond line", "err", errors.Join(errors.New("first"), errors.New("second")))
	got := lines(t, &buf)
	if len(got) != 1 || !strings.Contains(got[0], "config refused | second line") || !strings.Contains(got[0], "first | second") {
		t.Fatalf("text: %q, want one line with both parts of each", got)
	}
	buf.Reset()
	l = New(&buf, true)
	l.Info("config applied", "role", "ingress")
	got = lines(t, &buf)
	var rec map[string]any
	if len(got) != 1 || json.Unmarshal([]byte(got[0]), &rec) != nil || rec["msg"] != "config applied" || rec["level"] != "info" || rec["time"] == nil {
		t.Fatalf("json: %q, want one JSON record with msg, level and time", got)
	}
}

// klog's lines (client-go's leader election) go through our logger and
// format.
func TestKlogGoesThroughOurFormat(t *testing.T) {
	var buf bytes.Buffer
	l := New(&buf, true)
	RouteKlog(l)
	t.Cleanup(klog.ClearLogger)
	klog.Infof("attempting to acquire leader lease %s...", "tailplane/tailplane-operator")
	klog.ErrorS(errors.New("timeout"), "error retrieving resource lock", "lock", "tailplane/tailplane-operator")
	klog.V(4).Info("verbose klog line, filtered by klog's -v")
	klog.Flush()
	got := lines(t, &buf)
	if len(got) != 2 {
		t.Fatalf("%d lines, want 2:\n%s", len(got), buf.String())
	}
	for i, want := range []struct{ level, msg string }{{"info", "attempting to acquire leader lease tailplane/tailplane-operator..."}, {"error", "error retrieving resource lock"}} {
		var rec map[string]any
		if err := json.Unmarshal([]byte(got[i]), &rec); err != nil {
			t.Fatalf("line %d is not our JSON: %q", i, got[i])
		}
		if rec["level"] != want.level || rec["msg"] != want.msg || rec["component"] != "klog" {
			t.Errorf("line %d = %v, want level %s msg %q component klog", i, rec, want.level, want.msg)
		}
	}
}
