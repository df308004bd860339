// Package tslog makes every line a Tailplane binary logs one charmbracelet/log
// record on one line, in one format: its own lines, tailscale's tsnet's and
// klog's (client-go's leader election and informers).
//
//   - New is the process's logger: charmbracelet/log text (RFC 3339
//     timestamps) or JSON, through a writer that keeps each record on one
//     line and drops control bytes.
//   - Tsnet passes tsnet's logs: its chatty internal log (Server.Logf) at
//     debug level on a logger of its own level (TAILPLANE_TSNET_LOG_LEVEL),
//     so that a binary's debug level does not drown in tsnet's, and what it
//     means for the user (Server.UserLogf, e.g. login URLs) at info level;
//     each line is cleaned (tailscale's `[v1]` and `[v\x00JSON]` markers
//     become keys) and tagged component=tsnet.
//   - RouteKlog sends klog's lines to the logger (component=klog).
//
// It imports charmbracelet/log, go-logr/logr, k8s.io/klog/v2 and the
// standard library.
package tslog

import (
	"bytes"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/charmbracelet/log"
)

// Environment variables both binaries read.
const (
	EnvFormat     = "TAILPLANE_LOG_FORMAT"      // text (default) or json
	EnvTsnetLevel = "TAILPLANE_TSNET_LOG_LEVEL" // info (default) or debug
)

// Settings are the logging settings of the environment.
type Settings struct {
	JSON bool
	// TsnetDebug shows tsnet's internal log (debug level).
	TsnetDebug bool
}

// FromEnv reads TAILPLANE_LOG_FORMAT and TAILPLANE_TSNET_LOG_LEVEL through
// getenv.
func FromEnv(getenv func(string) string) (Settings, error) {
	var s Settings
	switch v := getenv(EnvFormat); v {
	case "", "text":
	case "json":
		s.JSON = true
	default:
		return s, fmt.Errorf("%s: %q is not one of text, json", EnvFormat, v)
	}
	switch v := getenv(EnvTsnetLevel); v {
	case "", "info":
	case "debug":
		s.TsnetDebug = true
	default:
		return s, fmt.Errorf("%s: %q is not one of info, debug", EnvTsnetLevel, v)
	}
	return s, nil
}

// New returns a logger writing to w: text, or JSON when json is true, with
// RFC 3339 timestamps (milliseconds), one record per line.
func New(w io.Writer, json bool) *log.Logger {
	opts := log.Options{ReportTimestamp: true, TimeFormat: "2006-01-02T15:04:05.000Z07:00"}
	if json {
		opts.Formatter = log.JSONFormatter
	}
	return log.NewWithOptions(OneLine(w), opts)
}

// OneLine returns a writer that writes each Write (charmbracelet/log writes
// a record with one Write) as one line: inner line breaks, with the
// indentation the text formatter gives a multi-line value, become " | ",
// and control bytes other than tab and escape (colours on a terminal) are
// dropped. A NUL or 0x01 in a log file makes grep call it binary.
func OneLine(w io.Writer) io.Writer { return oneLine{w} }

type oneLine struct{ w io.Writer }

func (o oneLine) Write(p []byte) (int, error) {
	if _, err := o.w.Write(Clean(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Clean returns p as one line ending in a newline: see OneLine.
func Clean(p []byte) []byte {
	body := bytes.TrimRight(p, "\r\n")
	out := make([]byte, 0, len(body)+1)
	for len(body) > 0 {
		r, size := utf8.DecodeRune(body)
		switch {
		case r == '\n' || r == '\r':
			// The break and the indentation after it ("  │ " for a value).
			rest := bytes.TrimLeft(body[size:], " \t\r\n")
			rest = bytes.TrimPrefix(rest, []byte("│ "))
			out = append(bytes.TrimRight(out, " "), " | "...)
			body = rest
			continue
		case r == '\t' || r == 0x1b:
		case r < 0x20 || r == 0x7f:
			body = body[size:]
			continue
		}
		out = append(out, body[:size]...)
		body = body[size:]
	}
	return append(out, '\n')
}
