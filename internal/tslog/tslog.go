// Package tslog passes the logs of tailscale's tsnet to charmbracelet/log:
// tsnet's chatty internal log (Server.Logf) at debug level, and what it
// means for the user (Server.UserLogf, e.g. login URLs) at info level, each
// line tagged component=tsnet.
//
// It imports charmbracelet/log and the standard library.
package tslog

import (
	"fmt"

	"github.com/charmbracelet/log"
)

// Debugf returns a tsnet Server.Logf that logs at debug level. It formats
// nothing unless debug is on, since tsnet logs often.
func Debugf(l *log.Logger) func(format string, args ...any) {
	return func(format string, args ...any) {
		if l.GetLevel() > log.DebugLevel {
			return
		}
		l.Debug(fmt.Sprintf(format, args...), "component", "tsnet")
	}
}

// Infof returns a tsnet Server.UserLogf that logs at info level.
func Infof(l *log.Logger) func(format string, args ...any) {
	return func(format string, args ...any) {
		l.Info(fmt.Sprintf(format, args...), "component", "tsnet")
	}
}
