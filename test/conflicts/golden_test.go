package conflicts

import (
	"strings"
	"testing"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// conflictsGolden lists the `# HELP` and `# TYPE` lines of the detector's own metric families
// (nodeaddr_conflicts_*); test/alerts reads it beside metrics.golden and metrics-approval.golden.
// NODEADDR_GOLDEN_UPDATE=1 rewrites it from this scrape.
var conflictsGolden = harness.MetricsGolden("metrics-conflicts.golden")

func checkConflictsGolden(t *testing.T, a *harness.Approver) {
	t.Helper()
	harness.CheckMetricFamiliesGolden(t, a, conflictsGolden, func(name string) bool {
		return strings.HasPrefix(name, "nodeaddr_conflicts_")
	})
}
