// Package csr proves --approve-kubelet-serving-csr on a real kube-apiserver: the real agent runs in
// a network namespace with a pod-bound token, the RBAC of deploy/ and of
// deploy/components/kubelet-serving-csr, and every admission policy; kubelets are the administrator
// impersonating system:node:NAME (what the Node authorizer sees for a kubelet's client certificate).
package csr

import (
	"os"
	"testing"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.MainE2E(m)) }
