package csr

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// approvalGolden lists the `# HELP` and `# TYPE` lines of the approver's own metric families
// (nodeaddr_csr_*, nodeaddr_approver_*, nodeaddr_build_info); test/deploy's TestGoldenMetricsCoverRulesAndDashboard
// reads it beside metrics.golden. NODEADDR_GOLDEN_UPDATE=1 rewrites it from this scrape.
var approvalGolden = filepath.Join("..", "deploy", "testdata", "metrics-approval.golden")

func checkApprovalGolden(t *testing.T, a *harness.Approver) {
	code, body, err := a.Get("/metrics")
	if err != nil || code != 200 {
		t.Fatalf("scrape: %d %v", code, err)
	}
	var lines []string
	for _, l := range strings.Split(body, "\n") {
		f := strings.Fields(l)
		if len(f) > 2 && (f[1] == "HELP" || f[1] == "TYPE") &&
			(strings.HasPrefix(f[2], "nodeaddr_csr_") || strings.HasPrefix(f[2], "nodeaddr_approver_") || f[2] == "nodeaddr_build_info") {
			lines = append(lines, l)
		}
	}
	slices.Sort(lines)
	got := strings.Join(lines, "\n") + "\n"
	if os.Getenv("NODEADDR_GOLDEN_UPDATE") == "1" {
		if err := os.WriteFile(approvalGolden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(approvalGolden)
	if err != nil {
		t.Fatalf("%v (NODEADDR_GOLDEN_UPDATE=1 go test ./csr/ writes it)", err)
	}
	if got != string(want) {
		t.Errorf("the approver's metric families differ from %s (NODEADDR_GOLDEN_UPDATE=1 rewrites it):\ngot:\n%swant:\n%s", approvalGolden, got, want)
	}
}
