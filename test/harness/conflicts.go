package harness

import "testing"

// ConflictsUser is the API user of the conflict detector's ServiceAccount
// (deploy/components/address-conflicts), as audit records name it.
const ConflictsUser = "system:serviceaccount:kube-system:nodeaddr-conflicts"

// StartConflicts runs `nodeaddr conflicts` with a token of kube-system/nodeaddr-conflicts, as
// StartApprover runs the approver (same process handle: Logs, Metrics, Stop).
func StartConflicts(t testing.TB, cp *ControlPlane, args ...string) *Approver {
	t.Helper()
	return StartClusterSide(t, cp, "conflicts", "nodeaddr-conflicts", args...)
}
