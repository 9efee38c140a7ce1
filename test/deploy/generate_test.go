package deploy

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// The generated files — the dashboard in the kustomize base and the chart, the chart's copy of the
// alert rules, the chart's README — are what test/tools/ generates now: `make generate` was run after the
// last change of a generator or of its inputs (deploy/monitoring/prometheusrule.yaml, the chart's
// Chart.yaml, values.yaml and values.schema.json).
func TestGeneratedFilesAreFresh(t *testing.T) {
	for _, gen := range []string{"./monitoring", "./chartdoc"} {
		cmd := exec.Command("go", "run", gen, "-check", "-repo", harness.RepoDir())
		cmd.Dir = filepath.Join(harness.RepoDir(), "test", "tools")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Errorf("go run %s -check (in test/tools/): %v\n%s", gen, err, out.String())
		}
	}
}
