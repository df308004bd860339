package gatewayconformance

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"sigs.k8s.io/gateway-api/conformance/utils/suite"
	"sigs.k8s.io/gateway-api/pkg/features"
)

// resultsPath is the table of every test of the profiles with its result,
// relative to the repository root; docs/gateway.md links to it.
const resultsPath = "docs/conformance/gateway-api-v1.6.3-results.md"

// testResults records each test's outcome through the suite's Hook (the
// report has the failed and skipped tests of each profile, not the passed
// ones), for the table of resultsPath.
type testResults struct {
	mu  sync.Mutex
	got map[string]string
}

// record is the suite's Hook: it runs in each test's cleanup.
func (r *testResults) record(t *testing.T, test suite.ConformanceTest, _ *suite.ConformanceTestSuite) {
	result := "passed"
	switch {
	case t.Failed():
		result = "**failed**"
	case t.Skipped():
		result = "skipped"
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.got == nil {
		r.got = map[string]string{}
	}
	r.got[test.ShortName] = result
}

// profileFeatures are the core and extended features of each profile run.
func profileFeatures() map[suite.ConformanceProfileName][]features.FeatureName {
	out := map[suite.ConformanceProfileName][]features.FeatureName{}
	for _, p := range []suite.ConformanceProfile{suite.GatewayHTTPConformanceProfile, suite.GatewayGRPCConformanceProfile, suite.GatewayTLSConformanceProfile} {
		out[p.Name] = append(p.CoreFeatures.UnsortedList(), p.ExtendedFeatures.UnsortedList()...)
	}
	return out
}

// table is the Markdown table of every test of the profiles run, as the
// suite decides a test's profiles (all its features in the profile): its
// profiles, features and result. A test whose features are not all claimed
// is named with the features missing; with setupFailed, the others are
// "not run".
func (r *testResults) table(all []suite.ConformanceTest, claimed []features.FeatureName, setupFailed bool) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	byProfile := profileFeatures()
	var b strings.Builder
	b.WriteString("| Test | Profiles | Features | Result |\n|---|---|---|---|\n")
	rows, counts := 0, map[string]int{}
	for _, test := range all {
		var profiles []string
		for name, fs := range byProfile {
			if !slices.ContainsFunc(test.Features, func(f features.FeatureName) bool { return !slices.Contains(fs, f) }) {
				profiles = append(profiles, string(name))
			}
		}
		if len(profiles) == 0 {
			continue
		}
		slices.Sort(profiles)
		var names, missing []string
		for _, f := range test.Features {
			names = append(names, string(f))
			if !slices.Contains(claimed, f) {
				missing = append(missing, string(f))
			}
		}
		result, ok := r.got[test.ShortName]
		switch {
		case len(missing) > 0:
			result = "not claimed: " + strings.Join(missing, ", ")
		case setupFailed:
			result = "not run: the suite's Setup failed"
		case !ok:
			result = "not run"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", test.ShortName, strings.Join(profiles, ", "), strings.Join(names, ", "), result)
		rows++
		counts[strings.SplitN(result, ":", 2)[0]]++
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var summary []string
	for _, k := range keys {
		summary = append(summary, fmt.Sprintf("%s %d", strings.Trim(k, "*"), counts[k]))
	}
	return fmt.Sprintf("%d tests of the profiles: %s.\n\n%s", rows, strings.Join(summary, ", "), b.String())
}

// writeResults writes the table with a header that says where it comes
// from.
func writeResults(t *testing.T, path, version string, table string) {
	text := "# Gateway API conformance: every test of GATEWAY-HTTP, GATEWAY-GRPC and GATEWAY-TLS\n\n" +
		"Written by `go tool task e2e:gateway-conformance` (kind-e2e/gatewayconformance) at commit " + version +
		", with the report beside it; docs/gateway.md, \"Conformance\", says how it runs. A test is \"not claimed\" when " +
		"one of its features is an extended feature Tailplane does not claim yet.\n\n" + table
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Errorf("the results table: %v", err)
		return
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Errorf("the results table: %v", err)
		return
	}
	t.Logf("results table written to %s", path)
}

func TestResultsTable(t *testing.T) {
	all := []suite.ConformanceTest{
		{ShortName: "HTTPRouteSimpleSameNamespace", Features: []features.FeatureName{features.SupportGateway, features.SupportHTTPRoute}},
		{ShortName: "HTTPRouteRequestMirror", Features: []features.FeatureName{features.SupportGateway, features.SupportHTTPRoute, features.SupportHTTPRouteRequestMirror}},
		{ShortName: "MeshBasic", Features: []features.FeatureName{features.SupportMesh}},
	}
	r := &testResults{}
	r.got = map[string]string{"HTTPRouteSimpleSameNamespace": "passed"}
	// The features a run claims (-supported-features may name more than
	// claimedFeatures).
	claimed := []features.FeatureName{features.SupportGateway, features.SupportReferenceGrant, features.SupportHTTPRoute}
	got := r.table(all, claimed, false)
	for _, want := range []string{
		"2 tests of the profiles: not claimed 1, passed 1.",
		"| HTTPRouteSimpleSameNamespace | GATEWAY-HTTP | Gateway, HTTPRoute | passed |",
		"| HTTPRouteRequestMirror | GATEWAY-HTTP | Gateway, HTTPRoute, HTTPRouteRequestMirror | not claimed: HTTPRouteRequestMirror |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the table lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "MeshBasic") {
		t.Errorf("a test of no profile run is in the table:\n%s", got)
	}
	if got := r.table(all[:1], claimed, true); !strings.Contains(got, "| not run: the suite's Setup failed |") {
		t.Errorf("with Setup failed, a claimed test is not \"not run\":\n%s", got)
	}
}
