package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nodeaddr/nodeaddr/internal/vocab"
	"github.com/nodeaddr/nodeaddr/test/admission"
	"github.com/nodeaddr/nodeaddr/test/harness"
)

// The admission policy on a real API server. Its cases are one table, admission.Table
// (test/admission/table.go): add a line there. TestAdmission runs it here on the pinned release;
// test/matrix runs the same table on every release of the matrix. What one write cannot show stays
// below: the annotation keys each --annotations configuration renders into the policy, and that
// SubjectAccessReviews escape admission. The install's confinement (overlays, the chart, uninstall
// order, the projected token) is in admission_install_test.go; the policy's IP syntax against
// net/netip in test/admission (no API server).

// Every case of admission.Table, on the policies of deploy/ as written (kube-system/nodeaddr, an
// empty --annotations).
func TestAdmission(t *testing.T) {
	harness.RequireE2E(t)
	cp := harness.StartControlPlane(t)
	harness.ApplyRBACAndPolicy(t, cp)
	admission.Run(t, cp, admission.Table)
}

// The annotation keys the agent may write besides nodeaddr.io/ ones are exactly those named by the
// --annotations value of the nodeaddr ConfigMap (the string the DaemonSet passes), which kustomize's
// replacements render into the policy: each preset's keys as vocab.Preset defines them (so the
// policy's copy of the presets is checked against the agent's) and the keys of KEY=FORMAT items.
// Each configuration is docs/customize.md's overlay that patches the ConfigMap (deploy/wiring its
// transformer), applied with kubectl as an operator would.
func TestAdmissionPolicyAnnotationKeysRendered(t *testing.T) {
	harness.RequireE2E(t)
	ctx := context.Background()
	const a, b = "node-a", "node-b"
	cp, agent := policyWorld(t, a, b, func(n string) harness.NodeSpec {
		return harness.NodeSpec{Name: n, Annotations: map[string]string{"example.com/owner": "ops"}}
	})
	kubectl := harness.KubectlFor(t, cp)

	presetKeys := func(names ...string) []string {
		var keys []string
		for _, n := range names {
			specs, _ := vocab.Preset(n)
			for _, s := range specs {
				keys = append(keys, s.Key)
			}
		}
		return keys
	}
	const explicit = "example.com/node-ip"
	// Every key some configuration could name, and one that none does.
	candidates := append(presetKeys(vocab.PresetNames()...), explicit, "example.com/owner")
	attempt := 0
	// write sets key to a value it never had, so that an earlier write cannot make it a no-op.
	write := func(key string) error {
		attempt++
		body, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{key: fmt.Sprintf("value-%d", attempt)}}})
		return harness.MergePatch(a, "", string(body)).Do(ctx, agent)
	}
	for _, c := range []struct {
		spec    string
		allowed []string // besides nodeaddr.io/ keys
	}{
		{"k3s", presetKeys("k3s")},
		{"flannel", presetKeys("flannel")},
		{"calico", presetKeys("calico")},
		{"nodeaddr", presetKeys("nodeaddr")},
		{" k3s , " + explicit + " = internal-ipv4,calico", append(presetKeys("k3s", "calico"), explicit)},
		{"nodeaddr,k3s,flannel,calico", presetKeys("nodeaddr", "k3s", "flannel", "calico")},
		{"", nil},
	} {
		rendered := harness.RenderKustomization(t, annotationsOverlay(t, c.spec))
		policy := harness.DecodeDocs(t, rendered)["ValidatingAdmissionPolicy/<nil>/"+harness.PolicyName]
		if got := fmt.Sprint(policy["spec"]); !strings.Contains(got, "name:annotationSpec") ||
			!strings.Contains(got, fmt.Sprintf("expression:'%s' name:annotationSpec", c.spec)) {
			t.Errorf("annotations=%q: not rendered into the policy: %s", c.spec, got)
		}
		kubectl(rendered, "apply", "--server-side", "--force-conflicts", "--field-manager=nodeaddr-install", "-f", "-")
		// The API server's policy informer follows the update within moments: poll until every key
		// is judged as expected, then report the judgement that disagreed last.
		var wrong []string
		if harness.Poll(30*time.Second, 200*time.Millisecond, "every key judged as expected", func() (bool, string) {
			wrong = nil
			for _, k := range candidates {
				err := write(k)
				want := strings.HasPrefix(k, "nodeaddr.io/") || slices.Contains(c.allowed, k)
				switch {
				case want && err != nil:
					wrong = append(wrong, fmt.Sprintf("%s denied: %v", k, err))
				case !want && !deniedByPolicy(err):
					wrong = append(wrong, fmt.Sprintf("%s: got %v, want a denial by the policy", k, err))
				case !want && !strings.Contains(err.Error(), fmt.Sprintf("rendered into this policy: '%s'", c.spec)):
					wrong = append(wrong, fmt.Sprintf("%s: denial %q does not name the rendered --annotations", k, err))
				}
			}
			return len(wrong) == 0, strings.Join(wrong, "; ")
		}) != nil {
			t.Errorf("annotations=%q:\n  %s", c.spec, strings.Join(wrong, "\n  "))
		}
	}
	if n := cp.Node(t, a); n.Annotations["example.com/owner"] != "ops" {
		t.Errorf("a key no configuration names was changed: example.com/owner=%q", n.Annotations["example.com/owner"])
	}
}

// The agent's SubjectAccessReviews cannot be denied by an admission policy: since Kubernetes 1.30
// the API server exempts SubjectAccessReviews from ValidatingAdmissionPolicies.
// A policy that denies the agent every SubjectAccessReview and every Event denies its Events, and
// still lets its question whether kube-system:default may list Secrets through. docs/security.md
// says so; if a release changes this, this test fails and the policy becomes possible.
func TestSubjectAccessReviewsEscapeAdmission(t *testing.T) {
	harness.RequireE2E(t)
	ctx := context.Background()
	const a, b = "node-a", "node-b"
	cp, agent := policyWorld(t, a, b, func(n string) harness.NodeSpec { return harness.NodeSpec{Name: n} })
	// The RBAC of an install that authorizes scrapers by SubjectAccessReview (an empty
	// metrics-allowed-scrapers); the shipped one grants none (test/listeners' TestAgentAsksNoSubjectAccessReview).
	grantReviews(t, cp)
	fail, forbidden := admissionv1.Fail, metav1.StatusReasonForbidden
	const name = "deny-agent-reviews"
	policy := &admissionv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{FailurePolicy: &fail,
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{Operations: []admissionv1.OperationType{admissionv1.Create},
					Rule: admissionv1.Rule{APIGroups: []string{"authorization.k8s.io", ""}, APIVersions: []string{"*"},
						Resources: []string{"subjectaccessreviews", "events"}}}}}},
			MatchConditions: []admissionv1.MatchCondition{{Name: "is-nodeaddr", Expression: fmt.Sprintf("request.userInfo.username == %q", harness.AgentUser)}},
			Validations:     []admissionv1.Validation{{Expression: "false", Message: "no review, no Event", Reason: &forbidden}}}}
	if _, err := cp.Admin.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: name, ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny}}}
	if _, err := cp.Admin.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The control: the policy is enforced (the agent's own Event, allowed by nodeaddr's policies, is denied).
	harness.Eventually(t, 10*time.Second, 100*time.Millisecond, "policy "+name+" enforced on Events", func() (bool, string) {
		err := harness.CreateEvent(ctx, agent, harness.NodeEvent(cp, t, a, "nodeaddr", "AddressesUpdated"))
		return harness.DeniedBy(err, name), fmt.Sprint(err)
	})
	oracle := &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{User: "system:serviceaccount:kube-system:default",
		Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"},
		ResourceAttributes: &authzv1.ResourceAttributes{Namespace: "kube-system", Verb: "list", Resource: "secrets"}}}
	out, err := agent.AuthorizationV1().SubjectAccessReviews().Create(ctx, oracle, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("the agent's review was refused (%v): admission now sees SubjectAccessReviews, and a policy can now deny them", err)
	}
	t.Logf("the agent asked whether kube-system:default may list Secrets and was answered (allowed %v) despite policy %s", out.Status.Allowed, name)
}

// grantReviews grants the agent's ServiceAccount create on subjectaccessreviews.
func grantReviews(t *testing.T, cp *harness.ControlPlane) {
	t.Helper()
	ctx := context.Background()
	const name = "nodeaddr-subjectaccessreviews"
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}}}}
	if _, err := cp.Admin.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "nodeaddr", Namespace: "kube-system"}}}
	if _, err := cp.Admin.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// Helpers of the tests of deploy/ that write as the agent.

// dedicated is a taint not the agent's.
var dedicated = corev1.Taint{Key: "example.com/dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}

// waitAllowed retries a write until it is allowed: the policy follows a ConfigMap edit within moments.
func waitAllowed(t *testing.T, cs kubernetes.Interface, p harness.NodePatch) {
	t.Helper()
	harness.PollWrite(t, cs, p, func(err error) bool { return err == nil }, "allowed")
}

// policyWorld starts a control plane with the policy, creates Nodes a and b from spec, and returns
// a client with the token of the agent on a, once the policy is enforced.
func policyWorld(t *testing.T, a, b string, spec func(name string) harness.NodeSpec) (*harness.ControlPlane, kubernetes.Interface) {
	t.Helper()
	cp := harness.StartControlPlane(t)
	harness.ApplyRBACAndPolicy(t, cp)
	for _, n := range []string{a, b} {
		cp.CreateNode(t, spec(n))
	}
	agent := harness.AgentClient(t, cp, a)
	harness.WaitPolicyEffective(t, agent, harness.MergePatch(b, "status", `{"status":{"addresses":[{"type":"ExternalIP","address":"192.0.2.99"}]}}`))
	return cp, agent
}

// deniedByPolicy reports whether err is this policy's denial, 403 Forbidden (RBAC's would not name
// it; a failed JSON-patch test is 422).
func deniedByPolicy(err error) bool { return harness.DeniedBy(err, harness.PolicyName) }
