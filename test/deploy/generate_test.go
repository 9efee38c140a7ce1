package deploy

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// The generated monitoring files (the dashboard in the kustomize base and the chart, the chart's
// copy of the alert rules) are what tools/monitoring generates now: `make generate` was run after
// the last change of the generator or of deploy/monitoring/prometheusrule.yaml.
func TestGeneratedMonitoringIsFresh(t *testing.T) {
	cmd := exec.Command("go", "run", ".", "-check", "-repo", harness.RepoDir())
	cmd.Dir = filepath.Join(harness.RepoDir(), "tools", "monitoring")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Errorf("go run ./tools/monitoring -check: %v\n%s", err, out.String())
	}
}
