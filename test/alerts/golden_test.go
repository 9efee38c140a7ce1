package alerts

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

const goldenMetrics = "testdata/metrics.golden"

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
	names = append(names, harness.RuleMetrics(t)...)
	for _, q := range dashboardQueries(t) {
		names = append(names, harness.MetricRE.FindAllString(q, -1)...)
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
