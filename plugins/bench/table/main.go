// Command table reads `go test -bench` output of plugins/bench on stdin and
// prints the Markdown tables of docs/performance.md, taking the median of
// every metric over the -count runs.
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// benchLine matches "BenchmarkX/y-2  N  v unit  v unit ...".
var benchLine = regexp.MustCompile(`^Benchmark(\S+?)(-\d+)?\s+\d+\s+(.*)$`)

type results map[string]map[string][]float64 // name -> unit -> samples

func parse(r io.Reader) (results, error) {
	res := results{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		m := benchLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		fields := strings.Fields(m[3])
		for i := 0; i+1 < len(fields); i += 2 {
			v, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				continue
			}
			if res[m[1]] == nil {
				res[m[1]] = map[string][]float64{}
			}
			res[m[1]][fields[i+1]] = append(res[m[1]][fields[i+1]], v)
		}
	}
	return res, sc.Err()
}

func (r results) median(name, unit string) (float64, bool) {
	s := slices.Clone(r[name][unit])
	if len(s) == 0 {
		return 0, false
	}
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2], true
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2, true
}

func (r results) cell(name, unit string, format func(float64) string) string {
	v, ok := r.median(name, unit)
	if !ok {
		return "-"
	}
	return format(v)
}

func us(ns float64) string   { return fmt.Sprintf("%.2f µs", ns/1000) }
func ms(ns float64) string   { return fmt.Sprintf("%.1f ms", ns/1e6) }
func mib(b float64) string   { return fmt.Sprintf("%.2f MiB", b/(1<<20)) }
func kib(b float64) string   { return fmt.Sprintf("%.1f KiB", b/(1<<10)) }
func plain(v float64) string { return fmt.Sprintf("%.0f", v) }

func size(b float64) string {
	if b >= 1<<20 {
		return mib(b)
	}
	return kib(b)
}

func main() {
	res, err := parse(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	routers := []string{"native", "go-guest", "go-guest-nodeadline", "as-guest", "as-guest-nodeadline"}
	fmt.Println("Routing decision (header canary), latency per decision, median of the runs:")
	fmt.Println()
	fmt.Println("| router | c1 p50 | c1 p99 | c16 p50 | c16 p99 | added at c1 p50 vs native |")
	fmt.Println("|---|---|---|---|---|---|")
	native, _ := res.median("Decision/native/c1", "p50-ns")
	for _, r := range routers {
		c1, c16 := "Decision/"+r+"/c1", "Decision/"+r+"/c16"
		added := "-"
		if v, ok := res.median(c1, "p50-ns"); ok && r != "native" {
			added = fmt.Sprintf("+%s (%.0f×)", us(v-native), v/native)
		}
		fmt.Printf("| %s | %s | %s | %s | %s | %s |\n", r, res.cell(c1, "p50-ns", us), res.cell(c1, "p99-ns", us),
			res.cell(c16, "p50-ns", us), res.cell(c16, "p99-ns", us), added)
	}
	fmt.Println()
	httpTable(res, "HTTP", "HTTP through the proxy's L7 handler (routing table + chain + reverse proxy to a loopback backend, no tsnet), 16 clients, variants in alternating 250 ms blocks:",
		[]string{"table-only", "table+native", "table+go-guest", "table+go-guest-nodeadline", "table+as-guest", "table+as-guest-nodeadline"})
	httpTable(res, "TsnetProxy", "HTTP through the whole tailplane-proxy (tsnet userspace WireGuard on a loopback tailnet, L7 on :80, reverse proxy), 16 clients on one tsnet client node, alternating blocks:",
		[]string{"no-plugin", "go-guest", "as-guest"})
	fmt.Println("Load and memory:")
	fmt.Println()
	fmt.Println("| guest | module | cold load (compile) | load (file cache) | Go heap per instance | linear memory per instance |")
	fmt.Println("|---|---|---|---|---|---|")
	for _, g := range []string{"go-guest", "as-guest"} {
		fmt.Printf("| %s | %s | %s | %s | %s | %s |\n", g, res.cell("ColdLoad/"+g+"/compile", "module-B", size),
			res.cell("ColdLoad/"+g+"/compile", "ns/op", ms), res.cell("ColdLoad/"+g+"/file-cache", "ns/op", ms),
			res.cell("InstanceMemory/"+g, "heap-B/inst", size), res.cell("InstanceMemory/"+g, "linear-B/inst", size))
	}
}

func httpTable(res results, bench, title string, variants []string) {
	if _, ok := res.median(bench, variants[0]+"-req/s"); !ok {
		return
	}
	fmt.Println(title)
	fmt.Println()
	fmt.Printf("| chain | CPU per request (client+proxy+backend) | requests/s at full CPU vs %s | wall-clock requests/s (noisy) | wall-clock vs %s |\n", variants[0], variants[0])
	fmt.Println("|---|---|---|---|---|")
	pct := func(d float64) string { return fmt.Sprintf("%+.1f%%", d) }
	for i, v := range variants {
		delta, cpuDelta := "-", "-"
		if i > 0 {
			delta, cpuDelta = res.cell(bench, v+"-delta-%", pct), res.cell(bench, v+"-cpu-delta-%", pct)
		}
		fmt.Printf("| %s | %s | %s | %s | %s |\n", v, res.cell(bench, v+"-cpu-us/req", func(f float64) string { return fmt.Sprintf("%.1f µs", f) }),
			cpuDelta, res.cell(bench, v+"-req/s", plain), delta)
	}
	fmt.Println()
}
