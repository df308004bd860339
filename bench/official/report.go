package official

import (
	"fmt"
	"io"
	"strings"
)

// Command is the one command that reproduces a report.
const Command = "go tool task bench:official"

// Write prints the report: the compatibility table, the performance table
// and what did not work, as Markdown for docs/compatibility.md and
// docs/performance.md.
func (r Report) Write(w io.Writer, cfg Config) error {
	var b strings.Builder
	fmt.Fprintf(&b, "## Side by side with the official operator (%s)\n\n", OfficialVersion)
	fmt.Fprintf(&b, "`%s` (runs=%d, services=%d, load %s with %d clients), devcluster's real node.\n\n", Command, cfg.Runs, cfg.Services, cfg.LoadFor, cfg.LoadWorkers)
	b.WriteString("### Compatibility\n\n")
	b.WriteString(CompatTable(r.Compat))
	b.WriteString("\n### Performance (medians; ratio Tailplane / official)\n\n")
	b.WriteString(PerformanceTable(r.Lines))
	if len(r.Notes) > 0 {
		b.WriteString("\n### What did not work in this run\n\n")
		for _, n := range r.Notes {
			b.WriteString("- " + n + "\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
