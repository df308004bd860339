package tslog

import (
	"github.com/charmbracelet/log"
	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
)

// RouteKlog sends klog's lines (client-go's leader election, reflector
// errors) to l, tagged component=klog, instead of klog's own format on
// stderr. klog's -v verbosity still filters its V(n) lines (0: none).
// klog's logger is process-wide: call it once, from main.
func RouteKlog(l *log.Logger) {
	klog.SetLogger(KlogLogger(l))
}

// KlogLogger is the logr.Logger RouteKlog installs (charmbracelet/log is a
// slog.Handler; logr.FromSlogHandler maps V(n) to slog level -n).
func KlogLogger(l *log.Logger) logr.Logger {
	return logr.FromSlogHandler(l.With("component", "klog"))
}
