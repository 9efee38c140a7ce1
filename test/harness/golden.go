package harness

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// CheckMetricFamiliesGolden scrapes a cluster-side command's /metrics and compares the sorted
// `# HELP` and `# TYPE` lines of the families keep selects with golden (MetricsGolden: a file of
// test/alerts' testdata, which test/alerts reads beside metrics.golden); NODEADDR_GOLDEN_UPDATE=1
// rewrites it from this scrape.
func CheckMetricFamiliesGolden(t testing.TB, a *Approver, golden string, keep func(family string) bool) {
	t.Helper()
	code, body, err := a.Get("/metrics")
	if err != nil || code != 200 {
		t.Fatalf("scrape: %d %v", code, err)
	}
	var lines []string
	for _, l := range strings.Split(body, "\n") {
		if f := strings.Fields(l); len(f) > 2 && (f[1] == "HELP" || f[1] == "TYPE") && keep(f[2]) {
			lines = append(lines, l)
		}
	}
	slices.Sort(lines)
	got := strings.Join(lines, "\n") + "\n"
	if os.Getenv("NODEADDR_GOLDEN_UPDATE") == "1" {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (NODEADDR_GOLDEN_UPDATE=1 go test writes it)", err)
	}
	if got != string(want) {
		t.Errorf("the metric families differ from %s (NODEADDR_GOLDEN_UPDATE=1 rewrites it):\ngot:\n%swant:\n%s", golden, got, want)
	}
}
