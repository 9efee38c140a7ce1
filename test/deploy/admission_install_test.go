package deploy

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// The admission policy as installed: each install path confines the agent (another writer allowed,
// the agent denied), no object it ships is a kill switch, and the DaemonSet's pod gets the token
// the policy reads. docs/security.md cites these tests. The policy's answers to each write are
// admission.Table (TestAdmission).

// installBase applies `kubectl kustomize deploy/` as an operator would and returns the render.
func installBase(t *testing.T, cp *harness.ControlPlane) string {
	t.Helper()
	rendered := harness.Kustomize(t, harness.DeployFile())
	harness.KubectlFor(t, cp)(rendered, "apply", "--server-side", "--field-manager=nodeaddr-install", "-f", "-")
	return rendered
}

// renderedObject is one document of a render, with what kubectl needs to delete it alone.
type renderedObject struct {
	kind, namespace, name, yaml string
}

func renderedObjects(t *testing.T, rendered string) []renderedObject {
	t.Helper()
	var out []renderedObject
	for _, doc := range strings.Split(rendered, "\n---\n") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		one := harness.DecodeDocs(t, doc)
		for key := range one {
			parts := strings.SplitN(key, "/", 3)
			out = append(out, renderedObject{kind: parts[0], namespace: parts[1], name: parts[2], yaml: doc})
		}
	}
	return out
}

// No object nodeaddr ships is a kill switch. With the ConfigMap deleted an administrator still
// cordons, a kubelet still writes its status, and the agent is still confined; uninstalling in the
// order of the render (kubectl delete -k), in reverse, and with the admission policies last (Helm)
// never blocks another writer of Nodes at any step.
func TestNoObjectIsAKillSwitch(t *testing.T) {
	harness.RequireE2E(t)
	ctx := context.Background()
	const a, b = "node-a", "node-b"
	cp := harness.StartControlPlane(t)
	for _, n := range []string{a, b} {
		cp.CreateNode(t, harness.NodeSpec{Name: n, Addresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: n}}})
	}
	rendered := installBase(t, cp)
	agent := harness.AgentClient(t, cp, a)
	other := harness.MergePatch(b, "status", `{"status":{"addresses":[{"type":"ExternalIP","address":"192.0.2.99"}]}}`)
	harness.WaitPolicyEffective(t, agent, other)

	if err := cp.Admin.CoreV1().ConfigMaps("kube-system").Delete(ctx, "nodeaddr", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The API server would have needed a moment to notice a missing parameter: give it that moment.
	time.Sleep(2 * time.Second) // measured window: the policy must keep denying throughout
	harness.OtherWritersWork(t, cp, a, "ConfigMap deleted")
	if err := other.Do(ctx, agent); !deniedByPolicy(err) {
		t.Errorf("ConfigMap deleted: agent's write to another Node: %v, want a denial by %s", err, harness.PolicyName)
	}
	if err := harness.MergePatch(a, "status", `{"status":{"addresses":[{"type":"ExternalIP","address":"192.0.2.10"},{"type":"Hostname","address":"node-a"}]}}`).Do(ctx, agent); err != nil {
		t.Errorf("ConfigMap deleted: agent's own addresses: %v", err)
	}

	objs := renderedObjects(t, rendered)
	policiesLast := slices.Clone(objs)
	slices.SortStableFunc(policiesLast, func(x, y renderedObject) int {
		px, py := strings.HasPrefix(x.kind, "ValidatingAdmissionPolicy"), strings.HasPrefix(y.kind, "ValidatingAdmissionPolicy")
		switch {
		case px == py:
			return 0
		case px:
			return 1
		}
		return -1
	})
	reversed := slices.Clone(objs)
	slices.Reverse(reversed)
	kubectl := harness.KubectlFor(t, cp)
	for _, order := range []struct {
		name string
		objs []renderedObject
	}{{"render order (kubectl delete -k)", objs}, {"reverse", reversed}, {"policies last (helm uninstall)", policiesLast}} {
		kubectl(rendered, "apply", "--server-side", "--force-conflicts", "--field-manager=nodeaddr-install", "-f", "-")
		// The previous round deleted the ServiceAccount, and with it the agent's token.
		agent = harness.AgentClient(t, cp, a)
		harness.WaitPolicyEffective(t, agent, other)
		for _, o := range order.objs {
			kubectl(o.yaml, "delete", "--wait=false", "-f", "-")
			harness.OtherWritersWork(t, cp, a, fmt.Sprintf("%s: %s %s/%s deleted", order.name, o.kind, o.namespace, o.name))
		}
	}
}

// docs/customize.md's overlay into another namespace with a name prefix (deploy/wiring its
// transformer) confines the agent there; the same overlay without the transformer (half-configured)
// fails closed for the agent only.
func TestOverlayIntoAnotherNamespace(t *testing.T) {
	harness.RequireE2E(t)
	ctx := context.Background()
	const a, b = "node-a", "node-b"
	for _, c := range []struct {
		name         string
		replacements bool
	}{{"with the wiring", true}, {"half-configured, without it", false}} {
		t.Run(c.name, func(t *testing.T) {
			overlay := documentedOverlay(t, "another namespace and names")
			if !c.replacements {
				overlay, _, _ = strings.Cut(overlay, "transformers:")
			}
			rendered := harness.RenderKustomization(t, overlay)
			objs := harness.DecodeDocs(t, rendered)
			for _, key := range []string{"ServiceAccount/node-agents/site-nodeaddr", "DaemonSet/node-agents/site-nodeaddr", "ValidatingAdmissionPolicy/<nil>/site-nodeaddr-own-node",
				"ValidatingAdmissionPolicyBinding/<nil>/site-nodeaddr-own-node", "ValidatingAdmissionPolicyBinding/<nil>/site-nodeaddr-events"} {
				if objs[key] == nil {
					t.Errorf("overlay lacks %s: %v", key, slices.Sorted(func(yield func(string) bool) {
						for k := range objs {
							if !yield(k) {
								return
							}
						}
					}))
				}
			}
			if c.replacements {
				for _, key := range []string{"Role/default/site-nodeaddr-events", "RoleBinding/default/site-nodeaddr-events"} {
					if objs[key] == nil {
						t.Errorf("the wiring keeps %s in default", key)
					}
				}
			}
			cp := harness.StartControlPlane(t)
			for _, ns := range []string{"node-agents"} {
				if _, err := cp.Admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			for _, n := range []string{a, b} {
				cp.CreateNode(t, harness.NodeSpec{Name: n, Addresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: n}}})
			}
			harness.KubectlFor(t, cp)(rendered, "apply", "--server-side", "--field-manager=nodeaddr-install", "-f", "-")
			agent := harness.TokenClient(t, cp, harness.PodToken(t, cp, "node-agents", "site-nodeaddr", a))
			otherNode := harness.MergePatch(b, "status", `{"status":{"addresses":[{"type":"ExternalIP","address":"192.0.2.99"}]}}`)
			// The policy takes a moment to be enforced; an unconfined agent's write keeps succeeding
			// (the wait then fails saying so).
			harness.PollWrite(t, agent, otherNode, func(err error) bool { return harness.NamesPolicy(err, "site-nodeaddr-own-node") }, "denied by site-nodeaddr-own-node")
			if err := otherNode.Do(ctx, agent); !harness.DeniedBy(err, "site-nodeaddr-own-node") {
				t.Errorf("agent in node-agents: write to another Node: %v, want a denial by site-nodeaddr-own-node", err)
			}
			own := harness.MergePatch(a, "status", `{"status":{"addresses":[{"type":"ExternalIP","address":"192.0.2.10"},{"type":"Hostname","address":"node-a"}]}}`)
			err := own.Do(ctx, agent)
			if c.replacements {
				if err != nil {
					t.Errorf("agent in node-agents: own addresses: %v", err)
				}
				if err := harness.CreateEvent(ctx, agent, harness.NodeEvent(cp, t, a, "nodeaddr", "AddressesUpdated")); err != nil {
					t.Errorf("agent in node-agents: Event about its Node in default: %v", err)
				}
			} else if !harness.DeniedBy(err, "site-nodeaddr-own-node") || !strings.Contains(err.Error(), "rendered for system:serviceaccount:kube-system:nodeaddr") {
				t.Errorf("half-configured: agent's own addresses: %v, want a denial naming the identity the policy was rendered for", err)
			}
			harness.OtherWritersWork(t, cp, a, c.name)
		})
	}
}

// The pod the DaemonSet's template makes gets exactly the projected token volume (the
// ServiceAccount admission adds none of its own), and the API server issues it for one hour.
func TestTokenProjectionOnAPIServer(t *testing.T) {
	harness.RequireE2E(t)
	ctx := context.Background()
	cp := harness.StartControlPlane(t)
	installBase(t, cp)
	cp.CreateNode(t, harness.NodeSpec{Name: "node-a"})
	ds, err := cp.Admin.AppsV1().DaemonSets("kube-system").Get(ctx, "nodeaddr", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "nodeaddr-test", Namespace: "kube-system"}, Spec: ds.Spec.Template.Spec}
	pod.Spec.NodeName = "node-a"
	var created *corev1.Pod
	harness.Eventually(t, 10*time.Second, 100*time.Millisecond, "the agent's pod created", func() (bool, string) {
		created, err = cp.Admin.CoreV1().Pods("kube-system").Create(ctx, pod, metav1.CreateOptions{})
		return err == nil, fmt.Sprint(err)
	})
	if len(created.Spec.Volumes) != 1 {
		t.Errorf("pod volumes %+v: want only kube-api-access", created.Spec.Volumes)
	}
	checkTokenProjection(t, created.Spec)
	exp := *created.Spec.Volumes[0].Projected.Sources[0].ServiceAccountToken.ExpirationSeconds
	tok := harness.PodToken(t, cp, "kube-system", "nodeaddr", "node-a")
	claims := jwtClaims(t, tok)
	if got := int64(claims["exp"].(float64) - claims["iat"].(float64)); got != exp {
		t.Errorf("token lifetime %d s, want %d", got, exp)
	}
	kube, _ := claims["kubernetes.io"].(map[string]any)
	if node, _ := kube["node"].(map[string]any); node == nil || node["name"] != "node-a" || node["uid"] == "" {
		t.Errorf("token lacks the node claims the policy checks: %v", claims)
	}
}

// jwtClaims decodes a JWT's payload (no verification: the API server issued it).
func jwtClaims(t *testing.T, token string) map[string]any {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT")
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var claims map[string]any
	if err := json.Unmarshal(raw, &claims); err != nil {
		t.Fatal(err)
	}
	return claims
}

// The chart, installed into another namespace with Helm, renders the policies for the agent
// there, which is confined (its write to another Node denied, its own allowed).
func TestHelmIntoAnotherNamespace(t *testing.T) {
	harness.RequireE2E(t)
	ctx := context.Background()
	const a, b = "node-a", "node-b"
	rendered := harness.HelmTemplate(t, "--namespace", "other")
	if !strings.Contains(rendered, "'system:serviceaccount:' + 'other' + ':' + 'nodeaddr'") {
		t.Fatalf("the chart did not render the policies for other/nodeaddr")
	}
	cp := harness.StartControlPlane(t)
	if _, err := cp.Admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "other"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{a, b} {
		cp.CreateNode(t, harness.NodeSpec{Name: n, Addresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: n}}})
	}
	harness.KubectlFor(t, cp)(rendered, "apply", "--server-side", "--field-manager=helm", "-f", "-")
	agent := harness.TokenClient(t, cp, harness.PodToken(t, cp, "other", "nodeaddr", a))
	otherNode := harness.MergePatch(b, "status", `{"status":{"addresses":[{"type":"ExternalIP","address":"192.0.2.99"}]}}`)
	harness.WaitPolicyEffective(t, agent, otherNode)
	if err := otherNode.Do(ctx, agent); !deniedByPolicy(err) {
		t.Errorf("agent in other: write to another Node: %v, want a denial by %s", err, harness.PolicyName)
	}
	if err := harness.MergePatch(a, "status", `{"status":{"addresses":[{"type":"ExternalIP","address":"192.0.2.10"},{"type":"Hostname","address":"node-a"}]}}`).Do(ctx, agent); err != nil {
		t.Errorf("agent in other: own addresses: %v", err)
	}
	harness.OtherWritersWork(t, cp, a, "chart in other")
}
