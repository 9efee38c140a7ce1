package conflicts

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// conflictsGolden lists the `# HELP` and `# TYPE` lines of the detector's own metric families
// (nodeaddr_conflicts_*); test/deploy reads it beside metrics.golden and metrics-approval.golden.
// NODEADDR_GOLDEN_UPDATE=1 rewrites it from this scrape.
var conflictsGolden = filepath.Join("..", "deploy", "testdata", "metrics-conflicts.golden")

func checkConflictsGolden(t *testing.T, a *harness.Approver) {
	t.Helper()
	code, body, err := a.Get("/metrics")
	if err != nil || code != 200 {
		t.Fatalf("scrape: %d %v", code, err)
	}
	var lines []string
	for _, l := range strings.Split(body, "\n") {
		if f := strings.Fields(l); len(f) > 2 && (f[1] == "HELP" || f[1] == "TYPE") && strings.HasPrefix(f[2], "nodeaddr_conflicts_") {
			lines = append(lines, l)
		}
	}
	slices.Sort(lines)
	got := strings.Join(lines, "\n") + "\n"
	if os.Getenv("NODEADDR_GOLDEN_UPDATE") == "1" {
		if err := os.WriteFile(conflictsGolden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(conflictsGolden)
	if err != nil {
		t.Fatalf("%v (NODEADDR_GOLDEN_UPDATE=1 go test ./conflicts/ writes it)", err)
	}
	if got != string(want) {
		t.Errorf("the detector's metric families differ from %s (NODEADDR_GOLDEN_UPDATE=1 rewrites it):\ngot:\n%swant:\n%s", conflictsGolden, got, want)
	}
}
