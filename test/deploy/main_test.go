// Package deploy proves what deploy/ ships on real components: the admission policy on a real
// kube-apiserver, the real binary run as the DaemonSet runs it, the chart and the kustomize output
// rendered and applied to the API server. The listeners' tests are in test/listeners, the alerts'
// and the dashboard's in test/alerts; the helpers they share with this package (renders, scrapes)
// in test/harness.
package deploy

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
