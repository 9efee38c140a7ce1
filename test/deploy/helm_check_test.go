package deploy

import (
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// checkHookFile is the chart's `helm test` hook (templates/tests/).
const checkHookFile = "templates/tests/check-install.yaml"

// helmTestHook renders the chart's test hook objects, as `helm test` creates them.
func helmTestHook(t *testing.T, extra ...string) map[string]harness.Object {
	t.Helper()
	args := append(append([]string{"template", "nodeaddr", harness.ChartDir(), "--namespace", "kube-system", "--show-only", checkHookFile}, harness.ChosenImage(t)...), extra...)
	out, stderr, err := harness.HelmRun(t, args...)
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	return harness.DecodeDocs(t, out)
}

// hookPod is the hook's Pod, decoded.
func hookPod(t *testing.T, objs map[string]harness.Object, key string) corev1.Pod {
	t.Helper()
	var p corev1.Pod
	if objs[key] == nil {
		t.Fatalf("no %s among %v", key, slices.Sorted(mapsKeys(objs)))
	}
	b, err := json.Marshal(objs[key])
	if err == nil {
		err = json.Unmarshal(b, &p)
	}
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func mapsKeys(m map[string]harness.Object) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// The test hook is a Pod running `nodeaddr --check-install` for the release's agents and the
// DaemonSet's nodeSelector, with a ServiceAccount of its own that may only list Nodes and the
// namespace's pods; every object is a test hook deleted once it passed, so an install has none.
func TestHelmTestHook(t *testing.T) {
	harness.RequireE2E(t)
	objs := helmTestHook(t, "--set-string", "nodeSelector.nodeaddr\\.io/managed=true")
	want := []string{"ClusterRole/<nil>/nodeaddr-test", "ClusterRoleBinding/<nil>/nodeaddr-test", "Pod/kube-system/nodeaddr-test",
		"Role/kube-system/nodeaddr-test", "RoleBinding/kube-system/nodeaddr-test", "ServiceAccount/kube-system/nodeaddr-test"}
	if got := slices.Sorted(mapsKeys(objs)); !slices.Equal(got, want) {
		t.Fatalf("hook objects %v, want %v", got, want)
	}
	for key, o := range objs {
		ann, _ := o["metadata"].(harness.Object)["annotations"].(harness.Object)
		if ann["helm.sh/hook"] != "test" || ann["helm.sh/hook-delete-policy"] != "before-hook-creation,hook-succeeded" {
			t.Errorf("%s: annotations %v, want a test hook deleted before the next run and once it succeeded", key, ann)
		}
	}
	// Read-only: list Nodes; list pods in the release's namespace.
	for key, rule := range map[string]string{"ClusterRole/<nil>/nodeaddr-test": `[{"apiGroups":[""],"resources":["nodes"],"verbs":["list"]}]`,
		"Role/kube-system/nodeaddr-test": `[{"apiGroups":[""],"resources":["pods"],"verbs":["list"]}]`} {
		if rules, _ := json.Marshal(objs[key]["rules"]); string(rules) != rule {
			t.Errorf("%s rules %s, want only %s", key, rules, rule)
		}
	}
	p := hookPod(t, objs, "Pod/kube-system/nodeaddr-test")
	if p.Spec.ServiceAccountName != "nodeaddr-test" || p.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("pod runs as %q, restart %q; want its own ServiceAccount, never restarted", p.Spec.ServiceAccountName, p.Spec.RestartPolicy)
	}
	if p.Labels["app.kubernetes.io/name"] == "nodeaddr" {
		t.Errorf("the hook pod carries the agents' selector label: it would count as an agent")
	}
	args := p.Spec.Containers[0].Args
	for _, a := range []string{"--check-install", "--check-namespace=kube-system",
		"--check-agent-selector=app.kubernetes.io/name=nodeaddr,app.kubernetes.io/instance=nodeaddr",
		"--check-node-selector=kubernetes.io/os=linux,nodeaddr.io/managed=true"} {
		if !slices.Contains(args, a) {
			t.Errorf("hook args %q lack %s", args, a)
		}
	}
	if c := p.Spec.Containers[0].SecurityContext; c == nil || c.ReadOnlyRootFilesystem == nil || !*c.ReadOnlyRootFilesystem ||
		c.AllowPrivilegeEscalation == nil || *c.AllowPrivilegeEscalation {
		t.Errorf("hook container security context %+v, want the agent's (read-only root, no escalation)", c)
	}
	// `helm install` renders no hook: the default template (tests skipped) has none of them.
	if out := harness.HelmTemplate(t); strings.Contains(out, "nodeaddr-test") {
		t.Errorf("the install renders the test hook's objects")
	}
}

// The hook's command, with the hook's own ServiceAccount and RBAC applied to a real API server:
// it passes when every selected Node has a ready agent and an InternalIP, and fails, saying which
// Node lacks what, when one does not. A Node outside the node selector does not count.
func TestCheckInstallOnAPIServer(t *testing.T) {
	harness.RequireE2E(t)
	ctx := context.Background()
	objs := helmTestHook(t)
	p := hookPod(t, objs, "Pod/kube-system/nodeaddr-test")
	var rendered []string
	for key, o := range objs {
		if !strings.HasPrefix(key, "Pod/") {
			b, err := json.Marshal(o) // JSON is YAML
			if err != nil {
				t.Fatal(err)
			}
			rendered = append(rendered, string(b)+"\n")
		}
	}
	cp := harness.StartControlPlane(t)
	harness.KubectlFor(t, cp)(strings.Join(rendered, "---\n"), "apply", "--server-side", "--field-manager=helm", "-f", "-")
	exp := int64(600)
	tr, err := cp.Admin.CoreV1().ServiceAccounts("kube-system").CreateToken(ctx, "nodeaddr-test",
		&authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kc := harness.Kubeconfig(t, t.TempDir(), cp.Config.Host, tr.Status.Token)

	linux := map[string]string{"kubernetes.io/os": "linux"}
	cp.CreateNode(t, harness.NodeSpec{Name: "node-a", Labels: linux, Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}}})
	cp.CreateNode(t, harness.NodeSpec{Name: "node-b", Labels: linux, Addresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: "node-b"}}})
	cp.CreateNode(t, harness.NodeSpec{Name: "win", Labels: map[string]string{"kubernetes.io/os": "windows"}})
	agentA := createAgentPod(t, cp, "node-a", true)
	agentB := createAgentPod(t, cp, "node-b", false)

	check := func() (string, int) {
		cmd := exec.Command(harness.MustBuild(t).Nodeaddr, append(slices.Clone(p.Spec.Containers[0].Args), "--kubeconfig="+kc, "--timeout=3s")...)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return string(out), ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return string(out), 0
	}
	out, code := check()
	if code != 1 || !strings.Contains(out, "node-a: ok: agent kube-system/"+agentA+" ready, InternalIP 10.0.0.1") ||
		!strings.Contains(out, "node-b: FAIL: agent kube-system/"+agentB+" not ready") || !strings.Contains(out, "no InternalIP") ||
		strings.Contains(out, "win") {
		t.Errorf("node-b not ready, without an InternalIP: exit %d, want 1 naming node-b's problems:\n%s", code, out)
	}

	setReady(t, cp, agentB)
	n := cp.Node(t, "node-b")
	n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.0.2"})
	if _, err := cp.Admin.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if out, code := check(); code != 0 || !strings.Contains(out, "nodeaddr install check passed: 2 Node(s)") {
		t.Errorf("every agent ready, every Node with an InternalIP: exit %d, want 0:\n%s", code, out)
	}
}

// createAgentPod creates an agent pod on node (labelled as the chart's agents are) and returns its
// name; ready sets its Ready condition, as the kubelet would.
func createAgentPod(t *testing.T, cp *harness.ControlPlane, node string, ready bool) string {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "nodeaddr-", Namespace: "kube-system",
			Labels: map[string]string{"app.kubernetes.io/name": "nodeaddr", "app.kubernetes.io/instance": "nodeaddr"}},
		Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: "nodeaddr-test",
			Containers: []corev1.Container{{Name: "nodeaddr", Image: "nodeaddr:test"}}},
	}
	created, err := cp.Admin.CoreV1().Pods("kube-system").Create(context.Background(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create agent pod on %s: %v", node, err)
	}
	if ready {
		setReady(t, cp, created.Name)
	}
	return created.Name
}

func setReady(t *testing.T, cp *harness.ControlPlane, name string) {
	t.Helper()
	ctx := context.Background()
	p, err := cp.Admin.CoreV1().Pods("kube-system").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(time.Now())}}
	if _, err := cp.Admin.CoreV1().Pods("kube-system").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}
