package deploy

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/metrics.golden from a live scrape")

const goldenMetrics = "testdata/metrics.golden"

// metricFamilies reduces an exposition to its `# HELP` and `# TYPE` lines, sorted: the metric
// families and their help text and types, without values (which differ on every scrape).
func metricFamilies(body string) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, "# HELP ") || strings.HasPrefix(l, "# TYPE ") {
			out = append(out, l)
		}
	}
	slices.Sort(out)
	return strings.Join(out, "\n") + "\n"
}

// checkGolden compares a live /metrics body with the golden file (or rewrites it with -update).
func checkGolden(t *testing.T, body string) {
	t.Helper()
	got := metricFamilies(body)
	if *update {
		if err := os.WriteFile(goldenMetrics, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(goldenMetrics)
	if err != nil {
		t.Fatalf("%v (run `go test ./deploy/ -run TestAgentRunsAsTheDaemonSetDoes -update`)", err)
	}
	if got != string(want) {
		t.Errorf("/metrics families differ from %s (rerun with -update if the change is intended):\n%s",
			goldenMetrics, lineDiff(string(want), got))
	}
}

func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var out []string
	for _, l := range w {
		if !slices.Contains(g, l) {
			out = append(out, "- "+l)
		}
	}
	for _, l := range g {
		if !slices.Contains(w, l) {
			out = append(out, "+ "+l)
		}
	}
	return strings.Join(out, "\n")
}

// Every metric the alert rules and the dashboard name exists in the golden /metrics file (or, for
// the discovery series an agent creates only with servers, in their registration), so a renamed
// metric breaks this test before it breaks an alert.
func TestGoldenMetricsCoverRulesAndDashboard(t *testing.T) {
	b, err := os.ReadFile(filepath.Clean(goldenMetrics))
	if err != nil {
		t.Fatal(err)
	}
	// The approver's families (`nodeaddr approver`'s registry; test/csr scrapes them).
	approval, err := os.ReadFile(filepath.Join("testdata", "metrics-approval.golden"))
	if err != nil {
		t.Fatal(err)
	}
	// The conflict detector's (`nodeaddr conflicts`; test/conflicts scrapes them) and the
	// remediator's (test/remediation scrapes them).
	conflicts, err := os.ReadFile(filepath.Join("testdata", "metrics-conflicts.golden"))
	if err != nil {
		t.Fatal(err)
	}
	remediation, err := os.ReadFile(filepath.Join("testdata", "metrics-remediation.golden"))
	if err != nil {
		t.Fatal(err)
	}
	golden := string(b) + string(approval) + string(conflicts) + string(remediation)
	exposed := func(name string) bool {
		for _, suf := range []string{"", "_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, suf); ok && strings.Contains(golden, "# TYPE "+base+" ") {
				return true
			}
		}
		return false
	}
	var names []string
	names = append(names, ruleMetrics(t)...)
	for _, q := range dashboardQueries(t) {
		names = append(names, metricRE.FindAllString(q, -1)...)
	}
	if len(names) < 5 {
		t.Fatalf("found only %d metric names in the rules and the dashboard", len(names))
	}
	for _, n := range names {
		if !exposed(n) && !isConditionalMetric(t, n) {
			t.Errorf("%s is used by the rules or the dashboard but is not in %s", n, goldenMetrics)
		}
	}
}
