// Package csr proves the central kubelet-serving CSR approver (`nodeaddr approver`,
// deploy/components/kubelet-serving-csr) on a real kube-apiserver: the real approver runs on the
// host with a token of its ServiceAccount, the real agent of node-a runs in a network namespace
// with a pod-bound token and --approval-record, with the RBAC of deploy/ and of the component and
// every admission policy; kubelets are the administrator impersonating system:node:NAME (what the
// Node authorizer sees for a kubelet's client certificate). component_test.go proves the component
// itself: its chart switches and kustomize render, its policies' CEL, and on a real API server
// that its RBAC and policies confine the approver and the agent's approval record.
package csr

import (
	"os"
	"testing"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.MainE2E(m)) }
