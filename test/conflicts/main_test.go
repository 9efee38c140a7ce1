// Package conflicts proves the address conflict detector (`nodeaddr conflicts`,
// deploy/components/address-conflicts) on a real kube-apiserver: the real detector runs on the
// host with a token of its own ServiceAccount, with the RBAC and admission policies of deploy/ and
// of the component; kubelets are the administrator writing Node status, agents hold pod-bound
// tokens of the agent's ServiceAccount.
package conflicts

import (
	"os"
	"testing"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.MainE2E(m)) }
