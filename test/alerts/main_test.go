// Package alerts proves deploy/monitoring's alert rules and dashboard: the rules pass promtool's
// checks and its unit tests (testdata/alerts_test.yaml), select the job each ServiceMonitor
// scrapes, every dashboard query returns data on a real Prometheus scraping a real agent, and every
// metric they name is in the golden metric families of the agent and of the cluster side
// (testdata/*.golden, written by test/deploy, test/csr, test/conflicts and test/remediation). It
// needs promtool and prometheus, not the Prometheus Operator (test/monitoring, which builds it,
// runs kube-prometheus-stack).
package alerts

import (
	"os"
	"testing"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.MainE2E(m)) }
