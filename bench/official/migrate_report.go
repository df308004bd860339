package official

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// gapStats counts results and the failed ones, and finds the longest time
// without a success from since to the last result: between successive
// successful requests (by the time they were sent), from since to the
// first success, and from the last success to the last request.
func gapStats(results []probeResult, since time.Time) (requests, failed int, gap time.Duration) {
	sorted := slices.Clone(results)
	slices.SortFunc(sorted, func(a, b probeResult) int { return a.at.Compare(b.at) })
	last := since
	for _, r := range sorted {
		requests++
		if !r.ok {
			failed++
			continue
		}
		if r.at.After(since) && r.at.Sub(last) > gap {
			gap = r.at.Sub(last)
		}
		if r.at.After(last) {
			last = r.at
		}
	}
	if n := len(sorted); n > 0 && sorted[n-1].at.Sub(last) > gap {
		gap = sorted[n-1].at.Sub(last)
	}
	return requests, failed, gap
}

// Write prints the migration's table and notes as Markdown for
// docs/migration.md and docs/performance.md.
func (r MigrateReport) Write(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "## From the official operator (%s) to Tailplane, in place\n\n", OfficialVersion)
	fmt.Fprintf(&b, "`%s -- -migrate`, devcluster's real node; %d requests/s per object through the tailnet (a fresh connection each, %s timeout). "+
		"Official release uninstalled (until its operator's Pod was gone) in %s; Tailplane installed (until its operator was ready) in %s.\n\n",
		Command, MigrateRate, migrateTimeout, r.Uninstall.Round(time.Millisecond), r.Install.Round(time.Millisecond))
	writeRows(&b, r.Rows)
	if len(r.BackRows) > 0 {
		fmt.Fprintf(&b, "\n## Back to the official operator, in place\n\n")
		fmt.Fprintf(&b, "`%s -- -migrate -back`, under the same load: Tailplane handed its proxies back (operatorConfig.handBack, until its operator was ready) in %s; "+
			"its release uninstalled (until its operator's Pod was gone) in %s; the official chart installed in %s. Devices against those the official operator first had.\n\n",
			Command, r.HandBack.Round(time.Millisecond), r.UninstallTailplane.Round(time.Millisecond), r.Reinstall.Round(time.Millisecond))
		writeRows(&b, r.BackRows)
	}
	if len(r.Notes) > 0 {
		b.WriteString("\nWhat did not work in this run:\n\n")
		for _, n := range r.Notes {
			b.WriteString("- " + n + "\n")
		}
	} else {
		b.WriteString("\nNothing left behind: no official StatefulSet, Service or Secret after the switch, the users' ProxyClass kept; after the objects were deleted, no device, no usable auth key, no proxy Secret.\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func writeRows(b *strings.Builder, rows []MigrateRow) {
	b.WriteString("| object | device before (node ID, addresses) | after | same device | requests | failed | longest gap |\n")
	b.WriteString("|---|---|---|---|---:|---:|---:|\n")
	for _, row := range rows {
		same := "yes"
		if !row.SameDevice() {
			same = "**no**"
			if len(row.Extra) > 0 {
				same += " (also " + strings.Join(row.Extra, ", ") + ")"
			}
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %d | %d | %s |\n", row.Object, describeDevices(row.Before), describeDevices(row.After), same,
			row.Requests, row.Fail, row.Gap.Round(10*time.Millisecond))
	}
}

func describeDevices(ds []Device) string {
	var parts []string
	for _, d := range ds {
		parts = append(parts, describeDevice(d))
	}
	return strings.Join(parts, "; ")
}

func describeDevice(d Device) string {
	if d.ID == "" {
		return "(none)"
	}
	return fmt.Sprintf("%s (%s, %s)", d.Name, d.ID, strings.Join(d.Addresses, ", "))
}
