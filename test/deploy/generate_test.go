package deploy

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// The committed dashboards (kustomize monitoring base and chart) are what tools/dashboards
// generates: `make generate` was run after the last change of the generator.
func TestGeneratedDashboardIsFresh(t *testing.T) {
	cmd := exec.Command("go", "run", ".")
	cmd.Dir = filepath.Join(harness.RepoDir(), "tools", "dashboards")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	want, err := cmd.Output()
	if err != nil {
		t.Fatalf("go run ./tools/dashboards: %v\n%s", err, stderr.String())
	}
	if len(want) < 1000 {
		t.Fatalf("the generator printed only %d bytes", len(want))
	}
	for _, f := range []string{deployFile("monitoring", "dashboard.json"), filepath.Join(chartDir(), "files", "dashboard.json")} {
		got, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run `make generate`\n%s", f, lineDiff(string(want), string(got)))
		}
	}
}
