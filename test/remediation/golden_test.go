package remediation

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// remediationGolden lists the `# HELP` and `# TYPE` lines of the remediator's own metric families
// (nodeaddr_remediation_*, nodeaddr_remediator_*, nodeaddr_build_info); test/deploy's
// TestGoldenMetricsCoverRulesAndDashboard and cmd/nodeaddr's TestDocsMetrics read it.
// NODEADDR_GOLDEN_UPDATE=1 rewrites it from this scrape.
var remediationGolden = filepath.Join("..", "deploy", "testdata", "metrics-remediation.golden")

func checkRemediationGolden(t *testing.T, r *harness.Approver) {
	t.Helper()
	code, body, err := r.Get("/metrics")
	if err != nil || code != 200 {
		t.Fatalf("scrape: %d %v", code, err)
	}
	var lines []string
	for _, l := range strings.Split(body, "\n") {
		f := strings.Fields(l)
		if len(f) > 2 && (f[1] == "HELP" || f[1] == "TYPE") &&
			(strings.HasPrefix(f[2], "nodeaddr_remediation_") || strings.HasPrefix(f[2], "nodeaddr_remediator_") || f[2] == "nodeaddr_build_info") {
			lines = append(lines, l)
		}
	}
	slices.Sort(lines)
	got := strings.Join(lines, "\n") + "\n"
	if os.Getenv("NODEADDR_GOLDEN_UPDATE") == "1" {
		if err := os.WriteFile(remediationGolden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(remediationGolden)
	if err != nil {
		t.Fatalf("%v (NODEADDR_GOLDEN_UPDATE=1 go test ./remediation/ writes it)", err)
	}
	if got != string(want) {
		t.Errorf("the remediator's metric families differ from %s (NODEADDR_GOLDEN_UPDATE=1 rewrites it):\ngot:\n%swant:\n%s", remediationGolden, got, want)
	}
}
