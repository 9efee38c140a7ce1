// Package deploy proves what deploy/ ships on real components: the admission policy on a real
// kube-apiserver, the real binary run as the DaemonSet runs it, the alerts with promtool, and the
// kustomize output applied to the API server.
package deploy

import (
	"os"
	"path/filepath"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.MainE2E(m)) }

// policyName is the ValidatingAdmissionPolicy (and binding) in deploy/admission-policy.yaml.
const policyName = "nodeaddr-own-node"

// deployFile is the path of a file under deploy/.
func deployFile(parts ...string) string {
	return filepath.Join(append([]string{harness.RepoDir(), "deploy"}, parts...)...)
}

// daemonSet decodes deploy/daemonset.yaml.
func daemonSet(t *testing.T) *appsv1.DaemonSet {
	t.Helper()
	data, err := os.ReadFile(deployFile("daemonset.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := harness.DecodeManifests(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 1 {
		t.Fatalf("daemonset.yaml: %d objects, want 1", len(objs))
	}
	ds, ok := objs[0].(*appsv1.DaemonSet)
	if !ok {
		t.Fatalf("daemonset.yaml holds a %T", objs[0])
	}
	return ds
}

// agentClient is a client with the agent's pod-bound token for node (what the DaemonSet pod on that
// node would use).
func agentClient(t *testing.T, cp *harness.ControlPlane, node string) kubernetes.Interface {
	t.Helper()
	return tokenClient(t, cp, cp.AgentToken(t, node))
}

func tokenClient(t *testing.T, cp *harness.ControlPlane, token string) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(&rest.Config{
		Host:            cp.Config.Host,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// run is harness.Run.
func run(t *testing.T, stdin string, name string, args ...string) string {
	t.Helper()
	return harness.Run(t, stdin, name, args...)
}
