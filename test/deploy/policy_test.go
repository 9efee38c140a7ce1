package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/nodeaddr/nodeaddr/publisher"
	"github.com/nodeaddr/nodeaddr/test/harness"
)

var dedicated = corev1.Taint{Key: "example.com/dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}

// applyPolicy creates deploy/rbac.yaml, deploy/config.yaml and deploy/admission-policy.yaml.
func applyPolicy(t *testing.T, cp *harness.ControlPlane) {
	t.Helper()
	cp.ApplyRBAC(t)
	if err := cp.ApplyPolicy(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// patch is one write the agent's token attempts (or another writer's, with its own manager).
type patch struct {
	node, subresource string
	pt                types.PatchType
	body              string
	manager           string // field manager; "" is nodeaddr
}

func (p patch) do(ctx context.Context, cs kubernetes.Interface) error {
	var sub []string
	if p.subresource != "" {
		sub = []string{p.subresource}
	}
	manager := p.manager
	if manager == "" {
		manager = "nodeaddr"
	}
	_, err := cs.CoreV1().Nodes().Patch(ctx, p.node, p.pt, []byte(p.body), metav1.PatchOptions{FieldManager: manager}, sub...)
	return err
}

func merge(node, subresource, body string) patch {
	return patch{node: node, subresource: subresource, pt: types.MergePatchType, body: body}
}

// replaceTaints is the agent's own kind of taint write: a JSON patch that tests the current list.
func replaceTaints(t *testing.T, cp *harness.ControlPlane, node string, edit func([]corev1.Taint) []corev1.Taint) patch {
	t.Helper()
	old := cp.Node(t, node).Spec.Taints
	body, err := json.Marshal([]map[string]any{
		{"op": "test", "path": "/spec/taints", "value": old},
		{"op": "replace", "path": "/spec/taints", "value": edit(slices.Clone(old))},
	})
	if err != nil {
		t.Fatal(err)
	}
	return patch{node: node, pt: types.JSONPatchType, body: string(body)}
}

// deniedByPolicy reports whether err is this policy's denial, 403 Forbidden (RBAC's would not name
// it; a failed JSON-patch test is 422).
func deniedByPolicy(err error) bool { return deniedBy(err, policyName) }

// waitPolicyEffective retries a write the policy denies until it is denied: a new policy takes a
// moment to reach the API server's admission chain.
func waitPolicyEffective(t *testing.T, cs kubernetes.Interface, p patch) {
	t.Helper()
	// Any answer naming the policy will do here (whatever its status code): the tests check the
	// code of the denials they are about.
	pollWrite(t, cs, p, func(err error) bool { return namesPolicy(err, policyName) }, "denied by policy "+policyName)
}

// namesPolicy reports whether err is an answer of the named policy, whatever its status code.
func namesPolicy(err error, policy string) bool {
	return err != nil && strings.Contains(err.Error(), fmt.Sprintf("ValidatingAdmissionPolicy '%s'", policy))
}

// waitAllowed retries a write until it is allowed: the policy follows a ConfigMap edit within moments.
func waitAllowed(t *testing.T, cs kubernetes.Interface, p patch) {
	t.Helper()
	pollWrite(t, cs, p, func(err error) bool { return err == nil }, "allowed")
}

// pollWrite retries p until its result satisfies want, for at most 30 s.
func pollWrite(t *testing.T, cs kubernetes.Interface, p patch, want func(error) bool, what string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := p.do(context.Background(), cs)
		if want(err) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("write not %s within 30s: last result %v", what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// policyWorld starts a control plane with the policy, creates Nodes a and b from spec, and returns
// a client with the token of the agent on a, once the policy is enforced.
func policyWorld(t *testing.T, a, b string, spec func(name string) harness.NodeSpec) (*harness.ControlPlane, kubernetes.Interface) {
	t.Helper()
	cp := harness.StartControlPlane(t)
	applyPolicy(t, cp)
	for _, n := range []string{a, b} {
		cp.CreateNode(t, spec(n))
	}
	agent := agentClient(t, cp, a)
	waitPolicyEffective(t, agent, merge(b, "status", `{"status":{"addresses":[{"type":"ExternalIP","address":"192.0.2.99"}]}}`))
	return cp, agent
}

// The agent's token for node A may set A's addresses and nodeaddr.io/ annotations and remove A's
// uninitialized taint; every other write is denied by the policy, through nodes and nodes/status.
func TestAdmissionPolicyRestrictsAgentToItsOwnNode(t *testing.T) {
	harness.RequireE2E(t)
	ctx := context.Background()
	const a, b = "node-a", "node-b"
	cp, agent := policyWorld(t, a, b, func(n string) harness.NodeSpec {
		return harness.NodeSpec{Name: n, Taints: []corev1.Taint{harness.Uninitialized, dedicated},
			Labels: map[string]string{"example.com/role": "worker"}, Annotations: map[string]string{"example.com/owner": "ops"},
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: n}}}
	})

	t.Run("allowed", func(t *testing.T) {
		for name, p := range map[string]patch{
			"set A's addresses (nodes/status, JSON patch with test)": {node: a, subresource: "status", pt: types.JSONPatchType, body: `[
				{"op":"test","path":"/status/addresses","value":[{"type":"Hostname","address":"node-a"}]},
				{"op":"replace","path":"/status/addresses","value":[{"type":"ExternalIP","address":"192.0.2.10"},{"type":"Hostname","address":"node-a"}]}]`},
			"write a nodeaddr.io/ annotation on A":  merge(a, "", `{"metadata":{"annotations":{"nodeaddr.io/published":"192.0.2.10"}}}`),
			"remove A's uninitialized taint":        replaceTaints(t, cp, a, withoutTaint(harness.Uninitialized.Key)),
			"remove a nodeaddr.io/ annotation on A": merge(a, "", `{"metadata":{"annotations":{"nodeaddr.io/published":null}}}`),
		} {
			if err := p.do(ctx, agent); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
		n := cp.Node(t, a)
		if got, want := strings.Join(harness.TaintKeys(n), ","), "example.com/dedicated,node.kubernetes.io/not-ready"; got != want {
			t.Errorf("A's taints = %s, want %s", got, want)
		}
		if len(n.Status.Addresses) != 2 || n.Status.Addresses[0].Address != "192.0.2.10" {
			t.Errorf("A's addresses = %v", n.Status.Addresses)
		}
	})

	t.Run("denied by the policy", func(t *testing.T) {
		before := cp.Node(t, a)
		for _, c := range []struct {
			name, why string
			p         patch
		}{
			{"set B's addresses", "may not modify Node 'node-b'",
				merge(b, "status", `{"status":{"addresses":[{"type":"ExternalIP","address":"192.0.2.99"}]}}`)},
			{"annotate B", "may not modify Node 'node-b'",
				merge(b, "", `{"metadata":{"annotations":{"nodeaddr.io/published":"x"}}}`)},
			{"remove B's uninitialized taint", "may not modify Node 'node-b'",
				replaceTaints(t, cp, b, withoutTaint(harness.Uninitialized.Key))},
			{"add a label to A through nodes", "labels (through nodes)",
				merge(a, "", `{"metadata":{"labels":{"example.com/x":"1"}}}`)},
			{"add a label to A through nodes/status", "labels (through nodes/status)",
				merge(a, "status", `{"metadata":{"labels":{"example.com/x":"1"}}}`)},
			{"remove a label from A", "labels (through nodes)",
				merge(a, "", `{"metadata":{"labels":{"example.com/role":null}}}`)},
			{"remove another taint from A", "only remove the node.cloudprovider.kubernetes.io/uninitialized taint",
				replaceTaints(t, cp, a, withoutTaint(dedicated.Key))},
			{"add a taint to A", "only remove the node.cloudprovider.kubernetes.io/uninitialized taint",
				replaceTaints(t, cp, a, func(ts []corev1.Taint) []corev1.Taint {
					return append(ts, corev1.Taint{Key: "example.com/evil", Effect: corev1.TaintEffectNoExecute})
				})},
			{"write a foreign annotation to A through nodes", "those its --annotations names (ConfigMap nodeaddr, rendered into this policy: '') (through nodes)",
				merge(a, "", `{"metadata":{"annotations":{"example.com/x":"1"}}}`)},
			{"write a foreign annotation to A through nodes/status", "those its --annotations names (ConfigMap nodeaddr, rendered into this policy: '') (through nodes/status)",
				merge(a, "status", `{"metadata":{"annotations":{"example.com/x":"1"}}}`)},
			{"change a foreign annotation on A", "annotations under nodeaddr.io/",
				merge(a, "", `{"metadata":{"annotations":{"example.com/owner":"me"}}}`)},
			{"cordon A", "Node spec", merge(a, "", `{"spec":{"unschedulable":true}}`)},
			{"set A's podCIDR", "Node spec", merge(a, "", `{"spec":{"podCIDR":"10.244.0.0/24","podCIDRs":["10.244.0.0/24"]}}`)},
			{"set a condition on A", "only status.addresses",
				merge(a, "status", `{"status":{"conditions":[{"type":"Ready","status":"True","reason":"Fake"}]}}`)},
			{"set A's capacity", "only status.addresses", merge(a, "status", `{"status":{"capacity":{"pods":"500"}}}`)},
		} {
			err := c.p.do(ctx, agent)
			if !deniedByPolicy(err) {
				t.Errorf("%s: got %v, want a denial by %s", c.name, err, policyName)
				continue
			}
			if !strings.Contains(err.Error(), c.why) {
				t.Errorf("%s: denial %q does not say %q", c.name, err, c.why)
			}
		}
		after := cp.Node(t, a)
		if after.ResourceVersion != before.ResourceVersion {
			t.Errorf("node A changed by denied writes: labels %v annotations %v taints %v", after.Labels,
				after.Annotations, harness.TaintKeys(after))
		}
	})

	t.Run("token without a node", func(t *testing.T) {
		exp := int64(600)
		tr, err := cp.Admin.CoreV1().ServiceAccounts("kube-system").CreateToken(ctx, "nodeaddr",
			&authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		err = merge(a, "", `{"metadata":{"annotations":{"nodeaddr.io/published":"x"}}}`).do(ctx, tokenClient(t, cp, tr.Status.Token))
		if !deniedByPolicy(err) || !strings.Contains(err.Error(), "carries no node name") {
			t.Fatalf("write with a token bound to no pod: got %v, want a denial naming the missing node", err)
		}
	})

	t.Run("others unaffected", func(t *testing.T) {
		// The policy matches only nodeaddr's ServiceAccount: an administrator still labels nodes.
		label := merge(a, "", `{"metadata":{"labels":{"example.com/x":"1"}}}`)
		label.manager = "kubectl-label"
		if err := label.do(ctx, cp.Admin); err != nil {
			t.Fatalf("admin label: %v", err)
		}
	})
}

func withoutTaint(key string) func([]corev1.Taint) []corev1.Taint {
	return func(ts []corev1.Taint) []corev1.Taint {
		return slices.DeleteFunc(ts, func(t corev1.Taint) bool { return t.Key == key })
	}
}

// The annotation keys the agent may write besides nodeaddr.io/ ones are exactly those named by the
// --annotations value of the nodeaddr ConfigMap (the string the DaemonSet passes), which kustomize's
// replacements render into the policy: each preset's keys as publisher.Preset defines them (so the
// policy's copy of the presets is checked against the agent's) and the keys of KEY=FORMAT items.
// Each configuration is docs/install.md's overlay that patches the ConfigMap (deploy/wiring its
// transformer), applied with kubectl as an operator would.
func TestAdmissionPolicyAnnotationKeysRendered(t *testing.T) {
	harness.RequireE2E(t)
	ctx := context.Background()
	const a, b = "node-a", "node-b"
	cp, agent := policyWorld(t, a, b, func(n string) harness.NodeSpec {
		return harness.NodeSpec{Name: n, Annotations: map[string]string{"example.com/owner": "ops"}}
	})
	kubectl := kubectlFor(t, cp)

	presetKeys := func(names ...string) []string {
		var keys []string
		for _, n := range names {
			specs, _ := publisher.Preset(n)
			for _, s := range specs {
				keys = append(keys, s.Key)
			}
		}
		return keys
	}
	const explicit = "example.com/node-ip"
	// Every key some configuration could name, and one that none does.
	candidates := append(presetKeys(publisher.PresetNames()...), explicit, "example.com/owner")
	attempt := 0
	// write sets key to a value it never had, so that an earlier write cannot make it a no-op.
	write := func(key string) error {
		attempt++
		body, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{key: fmt.Sprintf("value-%d", attempt)}}})
		return merge(a, "", string(body)).do(ctx, agent)
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
		rendered := renderKustomization(t, annotationsOverlay(t, c.spec))
		policy := decodeDocs(t, rendered)["ValidatingAdmissionPolicy/<nil>/"+policyName]
		if got := fmt.Sprint(policy["spec"]); !strings.Contains(got, "name:annotationSpec") ||
			!strings.Contains(got, fmt.Sprintf("expression:'%s' name:annotationSpec", c.spec)) {
			t.Errorf("annotations=%q: not rendered into the policy: %s", c.spec, got)
		}
		kubectl(rendered, "apply", "--server-side", "--force-conflicts", "--field-manager=nodeaddr-install", "-f", "-")
		// The API server's policy informer follows the update within moments: poll until every key
		// is judged as expected, then report the judgement that disagreed last.
		var wrong []string
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
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
			if len(wrong) == 0 || time.Now().After(deadline) {
				break
			}
		}
		if len(wrong) > 0 {
			t.Errorf("annotations=%q:\n  %s", c.spec, strings.Join(wrong, "\n  "))
		}
	}
	if n := cp.Node(t, a); n.Annotations["example.com/owner"] != "ops" {
		t.Errorf("a key no configuration names was changed: example.com/owner=%q", n.Annotations["example.com/owner"])
	}
}
