// Package e2ekit proves the kit that runs Kubernetes' own e2e tests (e2e.test v1.37.2, trimmed to
// the focus list of issue 52) against the harness's real clusters: the focus list names real specs,
// and on a one-node cluster the specs that need only one node pass. The two-node cluster runs the
// whole list. Run it alone: `cd test && go test -p 1 ./e2ekit`.
package e2ekit

import (
	"os"
	"testing"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.MainE2E(m)) }
