// Package matrix runs the version-independent promises of nodeaddr against every kube-apiserver
// release of harness.MatrixVersions (the oldest supported minor, one in between and the newest): the
// shipped kustomize base applies server-side, its admission policies compile without type-check
// warnings and give the answers of policyCases, and the real agent, with its node-bound token,
// publishes, removes the uninitialized taint and follows a renumbering with one write each. The full
// suite (test/e2e, test/deploy) runs on the newest release only. `go test ./matrix -update` rewrites
// the compatibility table in docs/install.md from the results.
package matrix

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.MainE2E(m)) }

// run runs a command and returns its combined output, failing the test on error.
func run(t *testing.T, stdin string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
	return string(out)
}
