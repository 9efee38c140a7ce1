// deploy/ applied to a real API server: the renders applied with the Prometheus Operator's CRDs,
// and the agent's RBAC and admission policy.
package harness

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// prometheusOperator is the module whose example/prometheus-operator-crd/ holds the ServiceMonitor
// and PrometheusRule CRDs.
const prometheusOperator = "github.com/prometheus-operator/prometheus-operator@v0.85.0"

// operatorCRDs returns the CRD files for ServiceMonitor and PrometheusRule, from the Go module cache.
func operatorCRDs(t *testing.T) []string {
	t.Helper()
	cmd := exec.Command("go", "mod", "download", "-json", prometheusOperator)
	cmd.Dir = t.TempDir() // outside any module: the download does not touch test/go.mod
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod download %s: %v\n%s", prometheusOperator, err, out)
	}
	var m struct{ Dir, Error string }
	if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" {
		t.Fatalf("go mod download %s: %v %s", prometheusOperator, err, m.Error)
	}
	dir := filepath.Join(m.Dir, "example", "prometheus-operator-crd")
	return []string{
		filepath.Join(dir, "monitoring.coreos.com_servicemonitors.yaml"),
		filepath.Join(dir, "monitoring.coreos.com_prometheusrules.yaml"),
	}
}

// ReleasedImage is the image the release workflow pushes for the VERSION file's version.
func ReleasedImage(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(RepoDir(), "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	return "ghcr.io/nodeaddr/nodeaddr:" + strings.TrimSpace(string(b))
}

// ApplyToAPIServer starts a control plane with the Prometheus Operator CRDs, applies rendered with a
// server-side dry run (which must create nothing), then for real (no warnings, every object
// applied), checks the DaemonSet and the policy binding exist, and returns the control plane and a
// kubectl bound to it for further checks.
func ApplyToAPIServer(t *testing.T, kubectl, rendered, manager string) (*ControlPlane, func(stdin string, args ...string) string) {
	t.Helper()
	cp := StartControlPlane(t)
	kc := Kubeconfig(t, t.TempDir(), cp.Config.Host, cp.AdminToken)
	k := func(stdin string, args ...string) string {
		t.Helper()
		return Run(t, stdin, kubectl, append([]string{"--kubeconfig=" + kc}, args...)...)
	}
	crds := operatorCRDs(t)
	k("", "apply", "--server-side", "-f", crds[0], "-f", crds[1])
	k("", "wait", "--for=condition=Established", "--timeout=30s",
		"crd/servicemonitors.monitoring.coreos.com", "crd/prometheusrules.monitoring.coreos.com")

	out := k(rendered, "apply", "--server-side", "--field-manager="+manager, "--dry-run=server", "-f", "-")
	t.Logf("dry run:\n%s", out)
	ctx := context.Background()
	if _, err := cp.Admin.AppsV1().DaemonSets("kube-system").Get(ctx, "nodeaddr", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("after a dry run the DaemonSet exists (or the get failed): %v", err)
	}
	out = k(rendered, "apply", "--server-side", "--field-manager="+manager, "-f", "-")
	t.Logf("apply:\n%s", out)
	if strings.Contains(out, "Warning:") {
		t.Errorf("the API server warned about the manifests:\n%s", out)
	}
	objects := len(DecodeDocs(t, rendered))
	if got := strings.Count(out, "serverside-applied"); got != objects {
		t.Errorf("apply reported %d objects applied, rendered %d:\n%s", got, objects, out)
	}
	ds, err := cp.Admin.AppsV1().DaemonSets("kube-system").Get(ctx, "nodeaddr", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if img, want := ds.Spec.Template.Spec.Containers[0].Image, ReleasedImage(t); img != want {
		t.Errorf("DaemonSet image = %q, want %s", img, want)
	}
	if _, err := cp.Admin.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Get(ctx, PolicyName, metav1.GetOptions{}); err != nil {
		t.Errorf("policy binding: %v", err)
	}
	return cp, k
}

// ApplyRBACAndPolicy creates deploy/rbac.yaml, deploy/config.yaml and deploy/admission-policy.yaml.
func ApplyRBACAndPolicy(t *testing.T, cp *ControlPlane) {
	t.Helper()
	cp.ApplyRBAC(t)
	if err := cp.ApplyPolicy(context.Background()); err != nil {
		t.Fatal(err)
	}
}
