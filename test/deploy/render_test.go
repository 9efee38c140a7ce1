package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// eventsPolicyName is the policy on the agent's Events (deploy/admission-policy.yaml).
const eventsPolicyName = "nodeaddr-events"

// documentedOverlay is the kustomization docs/customize.md shows under the comment "# overlay: NAME",
// as an operator copies it (its checkout paths, ../nodeaddr/deploy, are resolved by
// renderKustomization).
func documentedOverlay(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(harness.RepoDir(), "docs", "customize.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "```yaml\n# overlay: "+name+"\n")
	block, _, closed := strings.Cut(rest, "```")
	if !ok || !closed || !strings.Contains(block, "transformers:\n  - ../nodeaddr/deploy/wiring") {
		t.Fatalf("docs/customize.md has no overlay %q that lists deploy/wiring under transformers", name)
	}
	return block
}

// annotationsOverlay is docs/customize.md's annotations overlay with value in place of its example.
func annotationsOverlay(t *testing.T, value string) string {
	t.Helper()
	const example = `value: "nodeaddr,calico"`
	o := documentedOverlay(t, "annotations")
	if !strings.Contains(o, example) {
		t.Fatalf("docs/customize.md's annotations overlay lacks %s", example)
	}
	v, _ := json.Marshal(value)
	return strings.Replace(o, example, "value: "+string(v), 1)
}

// renderKustomization writes kustomization (naming this repository's deploy/ ../nodeaddr/deploy,
// as docs/customize.md does) into a temporary directory and returns `kubectl kustomize` of it.
func renderKustomization(t *testing.T, kustomization string) string {
	t.Helper()
	dir := t.TempDir()
	rel, err := filepath.Rel(dir, harness.DeployFile())
	if err != nil {
		t.Fatal(err)
	}
	k := strings.ReplaceAll(kustomization, "../nodeaddr/deploy", rel)
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	return run(t, "", harness.MustBuild(t).Kubectl, "kustomize", dir)
}

// kubectlFor returns a kubectl bound to cp as the administrator.
func kubectlFor(t *testing.T, cp *harness.ControlPlane) func(stdin string, args ...string) string {
	t.Helper()
	kc := harness.Kubeconfig(t, t.TempDir(), cp.Config.Host, cp.AdminToken)
	kubectl := harness.MustBuild(t).Kubectl
	return func(stdin string, args ...string) string {
		t.Helper()
		return run(t, stdin, kubectl, append([]string{"--kubeconfig=" + kc}, args...)...)
	}
}

// podToken returns a token of ServiceAccount ns/sa bound to a new Pod on node, as the kubelet would
// request it for the DaemonSet's projected volume (one hour).
func podToken(t *testing.T, cp *harness.ControlPlane, ns, sa, node string) string {
	t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "nodeaddr-", Namespace: ns},
		Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: sa,
			Containers: []corev1.Container{{Name: "nodeaddr", Image: "nodeaddr:test"}}},
	}
	harness.Eventually(t, 10*time.Second, 100*time.Millisecond, "create pod in "+ns, func() (bool, string) {
		created, err := cp.Admin.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			return false, err.Error()
		}
		pod = created
		return true, ""
	})
	exp := int64(3600)
	tr, err := cp.Admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{
		ExpirationSeconds: &exp,
		BoundObjectRef:    &authnv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token for %s/%s on %s: %v", ns, sa, node, err)
	}
	return tr.Status.Token
}

// otherWritersWork checks that writers of Nodes other than nodeaddr are not blocked: an
// administrator cordons and uncordons node, and its kubelet writes a status condition.
func otherWritersWork(t *testing.T, cp *harness.ControlPlane, node, when string) {
	t.Helper()
	ctx := context.Background()
	for _, body := range []string{`{"spec":{"unschedulable":true}}`, `{"spec":{"unschedulable":null}}`} {
		p := merge(node, "", body)
		p.manager = "kubectl-cordon"
		if err := p.do(ctx, cp.Admin); err != nil {
			t.Errorf("%s: administrator's cordon %s: %v", when, body, err)
		}
	}
	hb := fmt.Sprintf(`{"status":{"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","message":"%s","lastHeartbeatTime":"%s","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}`,
		strings.ReplaceAll(when, `"`, `'`), time.Now().UTC().Format(time.RFC3339))
	p := merge(node, "status", hb)
	p.manager = "kubelet"
	if err := p.do(ctx, cp.AsKubelet(t, node)); err != nil {
		t.Errorf("%s: kubelet status write: %v", when, err)
	}
}

// applyAnnotationsConfig sets --annotations as an operator does: docs/customize.md's overlay that
// patches the ConfigMap, applied with kubectl (ConfigMap and policy together).
func applyAnnotationsConfig(t *testing.T, cp *harness.ControlPlane, spec string) string {
	t.Helper()
	rendered := renderKustomization(t, annotationsOverlay(t, spec))
	kubectlFor(t, cp)(rendered, "apply", "--server-side", "--force-conflicts", "--field-manager=nodeaddr-install", "-f", "-")
	return rendered
}
