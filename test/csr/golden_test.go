package csr

import (
	"strings"
	"testing"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// approvalGolden lists the `# HELP` and `# TYPE` lines of the approver's own metric families
// (nodeaddr_csr_*, nodeaddr_approver_*, nodeaddr_build_info); test/alerts' TestGoldenMetricsCoverRulesAndDashboard
// reads it beside metrics.golden. NODEADDR_GOLDEN_UPDATE=1 rewrites it from this scrape.
var approvalGolden = harness.MetricsGolden("metrics-approval.golden")

func checkApprovalGolden(t *testing.T, a *harness.Approver) {
	t.Helper()
	harness.CheckMetricFamiliesGolden(t, a, approvalGolden, func(name string) bool {
		return strings.HasPrefix(name, "nodeaddr_csr_") || strings.HasPrefix(name, "nodeaddr_approver_") || name == "nodeaddr_build_info"
	})
}
