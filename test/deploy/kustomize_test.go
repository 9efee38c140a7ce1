package deploy

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// `kubectl kustomize deploy/` and `deploy/monitoring/` render, apply with a server-side dry run and
// then for real on the API server (with the Prometheus Operator's CRDs installed).
func TestKustomizeAppliesOnAPIServer(t *testing.T) {
	harness.RequireE2E(t)
	bins := harness.MustBuild(t)
	kubectl := func(stdin string, args ...string) string {
		t.Helper()
		return run(t, stdin, bins.Kubectl, args...)
	}
	base := kubectl("", "kustomize", harness.DeployFile())
	monitoring := kubectl("", "kustomize", harness.DeployFile("monitoring"))
	for _, want := range []string{"kind: ServiceAccount", "kind: ClusterRole", "kind: ClusterRoleBinding", "kind: DaemonSet",
		"kind: ValidatingAdmissionPolicy", "kind: ValidatingAdmissionPolicyBinding", "kind: FlowSchema",
		"kind: PriorityLevelConfiguration", "image: " + harness.ReleasedImage(t)} {
		if !strings.Contains(base, "\n"+want+"\n") && !strings.Contains(base, want+"\n") {
			t.Errorf("kubectl kustomize deploy/ lacks %q", want)
		}
	}
	for _, want := range []string{"kind: Service\n", "kind: ServiceMonitor\n", "kind: PrometheusRule\n"} {
		if !strings.Contains(monitoring, want) {
			t.Errorf("kubectl kustomize deploy/monitoring lacks %q", strings.TrimSpace(want))
		}
	}

	rendered := base + "---\n" + monitoring
	cp, k := harness.ApplyToAPIServer(t, bins.Kubectl, rendered, "nodeaddr-install")
	ctx := context.Background()
	svc, err := cp.Admin.CoreV1().Services("kube-system").Get(ctx, "nodeaddr", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if svc.Spec.ClusterIP != "None" {
		t.Errorf("metrics Service clusterIP = %q, want None (headless)", svc.Spec.ClusterIP)
	}
	for _, r := range []string{"servicemonitor/nodeaddr", "prometheusrule/nodeaddr"} {
		k("", "-n", "kube-system", "get", r)
	}
	// An upgrade re-applies the output: it must not conflict with itself.
	k(rendered, "apply", "--server-side", "--field-manager=nodeaddr-install", "-f", "-")
}
