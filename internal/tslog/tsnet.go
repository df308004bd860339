package tslog

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/log"
)

// Tsnet passes one tsnet.Server's logs (or those of a tailscale state store)
// to a logger.
type Tsnet struct {
	// internal logs tsnet's internal log at debug; its level is its own.
	internal *log.Logger
	// user is the binary's logger itself, so that its level applies.
	user *log.Logger
}

// NewTsnet passes tsnet's logs to l, tagged component=tsnet. Its internal
// log shows only when debug is true (TAILPLANE_TSNET_LOG_LEVEL=debug),
// whatever l's level: with several hundred lines a minute it would drown a
// binary's own debug lines.
func NewTsnet(l *log.Logger, debug bool) *Tsnet {
	t := &Tsnet{internal: l.With("component", "tsnet"), user: l}
	if debug {
		t.internal.SetLevel(log.DebugLevel)
	} else {
		t.internal.SetLevel(log.InfoLevel)
	}
	return t
}

// Logf is a tsnet Server.Logf: debug level. It formats nothing unless the
// level shows it.
func (t *Tsnet) Logf(format string, args ...any) {
	if t.internal.GetLevel() > log.DebugLevel {
		return
	}
	msg, kv := Line(fmt.Sprintf(format, args...))
	if msg != "" {
		t.internal.Debug(msg, kv...)
	}
}

// UserLogf is a tsnet Server.UserLogf: info level.
func (t *Tsnet) UserLogf(format string, args ...any) {
	msg, kv := Line(fmt.Sprintf(format, args...))
	if msg != "" {
		t.user.Info(msg, append(kv, "component", "tsnet")...)
	}
}

// jsonMarker starts tailscale's structured records (logger.Logf.JSON):
// "[v\x00JSON]" then the verbosity digit, then the JSON object.
const jsonMarker = "[v\x00JSON]"

// Line turns one tailscale log call into a message on one line and keys:
// a `[vN] ` verbosity marker becomes v=N, a structured record's marker
// becomes v=N json=true with the object as the message, the lines of a
// multi-line message (netmap diffs) are joined with " | ", and control
// bytes are dropped.
func Line(s string) (msg string, keyvals []any) {
	if rest, ok := strings.CutPrefix(s, jsonMarker); ok {
		if len(rest) > 0 && rest[0] >= '0' && rest[0] <= '9' {
			keyvals = append(keyvals, "v", int(rest[0]-'0'))
			rest = rest[1:]
		}
		keyvals = append(keyvals, "json", true)
		s = rest
	} else if len(s) >= 5 && s[0] == '[' && s[1] == 'v' && s[2] >= '1' && s[2] <= '9' && s[3] == ']' && s[4] == ' ' {
		keyvals = append(keyvals, "v", int(s[2]-'0'))
		s = s[5:]
	}
	var lines []string
	for _, ln := range strings.Split(s, "\n") {
		if ln = strings.TrimSpace(string(Clean([]byte(ln)))); ln != "" {
			lines = append(lines, ln)
		}
	}
	return strings.Join(lines, " | "), keyvals
}
