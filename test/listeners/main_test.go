// Package listeners proves the agent's listeners and its metrics auth on a real kube-apiserver: the
// real binary, run as the DaemonSet runs it in a network namespace, serves /metrics over TLS only
// to the scrapers its ConfigMap lists with a token for the audience nodeaddr, keeps its probes and
// scrapes answering through token and connection floods within its budgets, asks the API server no
// SubjectAccessReview, and serves the chart's certificate from a Secret.
package listeners

import (
	"os"
	"testing"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.MainE2E(m)) }
