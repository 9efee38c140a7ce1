// Package remediation proves the remediator (`nodeaddr remediator`,
// deploy/components/pod-remediation) on a real kube-apiserver: the real binary runs on the host
// with a token of its ServiceAccount, with the RBAC of deploy/ and of the component and its
// admission policies. There is no kubelet: the test writes the hostNetwork pods and their status as
// a kubelet would, renumbers Nodes by writing their status, and completes an eviction's deletion as
// a kubelet would (a delete with grace period 0 once the pod is terminating). component_test.go
// proves the component's render: the chart's remediator.enabled against the kustomize component,
// its policies' CEL.
package remediation

import (
	"os"
	"testing"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.MainE2E(m)) }
