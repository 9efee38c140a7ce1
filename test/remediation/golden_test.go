package remediation

import (
	"strings"
	"testing"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// remediationGolden lists the `# HELP` and `# TYPE` lines of the remediator's own metric families
// (nodeaddr_remediation_*, nodeaddr_remediator_*, nodeaddr_build_info); test/alerts'
// TestGoldenMetricsCoverRulesAndDashboard and cmd/nodeaddr's TestDocsMetrics read it.
// NODEADDR_GOLDEN_UPDATE=1 rewrites it from this scrape.
var remediationGolden = harness.MetricsGolden("metrics-remediation.golden")

func checkRemediationGolden(t *testing.T, r *harness.Approver) {
	t.Helper()
	harness.CheckMetricFamiliesGolden(t, r, remediationGolden, func(name string) bool {
		return strings.HasPrefix(name, "nodeaddr_remediation_") || strings.HasPrefix(name, "nodeaddr_remediator_") || name == "nodeaddr_build_info"
	})
}
