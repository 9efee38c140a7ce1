// Package deploy proves what deploy/ ships on real components: the admission policy on a real
// kube-apiserver, the real binary run as the DaemonSet runs it, the alerts with promtool, and the
// kustomize output applied to the API server.
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
