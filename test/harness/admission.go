package harness

import (
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// AsKubelet is the administrator impersonating node's kubelet (system:node:NAME in system:nodes),
// which the Node authorizer lets write its own Node and its status.
func (cp *ControlPlane) AsKubelet(t testing.TB, node string) kubernetes.Interface {
	t.Helper()
	cfg := rest.CopyConfig(cp.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:node:" + node, Groups: []string{"system:nodes", "system:authenticated"}}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}
