// Package matrix runs the version-independent promises of nodeaddr against every kube-apiserver
// release of harness.MatrixVersions (the oldest supported minor, one in between and the newest): the
// shipped kustomize base applies server-side, its admission policies compile without type-check
// warnings and give the answers of admission.Table (test/admission, the table test/deploy runs),
// and the real agent, with its node-bound token, publishes, removes the uninitialized taint and
// follows a renumbering with one write each. The rest of the suite (test/e2e, test/deploy) runs on
// the newest release only. `go test ./matrix -update` rewrites the compatibility table in
// docs/install.md from the results.
package matrix

import (
	"os"
	"testing"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.MainE2E(m)) }

// run is harness.Run.
func run(t *testing.T, stdin string, name string, args ...string) string {
	t.Helper()
	return harness.Run(t, stdin, name, args...)
}
