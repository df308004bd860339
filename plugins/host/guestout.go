package host

import (
	"bytes"
	"strings"

	"github.com/charmbracelet/log"
)

// Bounds of what guestOutput keeps.
const (
	// maxCallOutput is how much of one call's output is kept to find a
	// panic message in (a Go panic's first line comes first).
	maxCallOutput = 4 << 10
	// maxLine is the longest line logged whole; a longer one is cut.
	maxLine = 4 << 10
	// maxGuestMessage bounds the panic message put into a call's error.
	maxGuestMessage = 512
)

// guestOutput is one instance's stdout and stderr. Guests write in
// fragments (Go's runtime prints a panic a word at a time), so output is
// logged whole lines at a time, at debug level. What the guest wrote
// during the current call is kept, so that a call that traps can report
// the guest's panic message at the default level with its error. An
// instance runs one call at a time, so no lock is needed.
type guestOutput struct {
	log     *log.Logger
	partial []byte // the unfinished last line
	call    []byte // the current call's output, up to maxCallOutput
}

func (o *guestOutput) Write(b []byte) (int, error) {
	if room := maxCallOutput - len(o.call); room > 0 {
		o.call = append(o.call, b[:min(len(b), room)]...)
	}
	o.partial = append(o.partial, b...)
	rest := o.partial
	for {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			break
		}
		o.log.Debug("guest output", "text", string(rest[:i]))
		rest = rest[i+1:]
	}
	if len(rest) > maxLine {
		o.log.Debug("guest output", "text", string(rest[:maxLine]))
		rest = nil
	}
	o.partial = append(o.partial[:0], rest...)
	return len(b), nil
}

// startCall forgets the previous call's output.
func (o *guestOutput) startCall() { o.call = o.call[:0] }

// panicMessage finds the guest's own account of a failure in the current
// call's output: Go's "panic: ..." or "fatal error: ...", Rust's
// "panicked at ...". Empty if the guest printed none.
func (o *guestOutput) panicMessage() string {
	lines := strings.Split(string(o.call), "\n")
	for i, line := range lines {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "panic: "), strings.HasPrefix(line, "fatal error: "):
			return clip(strings.TrimSuffix(line, " [recovered]"))
		case strings.Contains(line, "panicked at"):
			// Rust puts the message on the next line.
			if i+1 < len(lines) && strings.TrimSpace(lines[i+1]) != "" {
				line += " " + strings.TrimSpace(lines[i+1])
			}
			return clip(line)
		}
	}
	return ""
}

func clip(s string) string {
	if len(s) > maxGuestMessage {
		return s[:maxGuestMessage] + "…"
	}
	return s
}
