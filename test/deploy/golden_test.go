package deploy

import (
	"flag"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

var update = flag.Bool("update", false, "rewrite test/alerts/testdata/metrics.golden from a live scrape")

// goldenMetrics is the agent's metric families, which test/alerts checks the rules and the dashboard
// against.
var goldenMetrics = harness.MetricsGolden("metrics.golden")

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
