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
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// The agent's confinement as installed, one test per way out of it: each shows another writer
// allowed and the agent denied. docs/security.md cites them line by line.

// installBase applies `kubectl kustomize deploy/` as an operator would and returns the render.
func installBase(t *testing.T, cp *harness.ControlPlane) string {
	t.Helper()
	rendered := kustomize(t, deployFile())
	kubectlFor(t, cp)(rendered, "apply", "--server-side", "--field-manager=nodeaddr-install", "-f", "-")
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
		one := decodeDocs(t, doc)
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
	agent := agentClient(t, cp, a)
	other := merge(b, "status", `{"status":{"addresses":[{"type":"ExternalIP","address":"192.0.2.99"}]}}`)
	waitPolicyEffective(t, agent, other)

	if err := cp.Admin.CoreV1().ConfigMaps("kube-system").Delete(ctx, "nodeaddr", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The API server would have needed a moment to notice a missing parameter: give it that moment.
	time.Sleep(2 * time.Second)
	otherWritersWork(t, cp, a, "ConfigMap deleted")
	if err := other.do(ctx, agent); !deniedByPolicy(err) {
		t.Errorf("ConfigMap deleted: agent's write to another Node: %v, want a denial by %s", err, policyName)
	}
	if err := merge(a, "status", `{"status":{"addresses":[{"type":"ExternalIP","address":"192.0.2.10"},{"type":"Hostname","address":"node-a"}]}}`).do(ctx, agent); err != nil {
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
	kubectl := kubectlFor(t, cp)
	for _, order := range []struct {
		name string
		objs []renderedObject
	}{{"render order (kubectl delete -k)", objs}, {"reverse", reversed}, {"policies last (helm uninstall)", policiesLast}} {
		kubectl(rendered, "apply", "--server-side", "--force-conflicts", "--field-manager=nodeaddr-install", "-f", "-")
		// The previous round deleted the ServiceAccount, and with it the agent's token.
		agent = agentClient(t, cp, a)
		waitPolicyEffective(t, agent, other)
		for _, o := range order.objs {
			kubectl(o.yaml, "delete", "--wait=false", "-f", "-")
			otherWritersWork(t, cp, a, fmt.Sprintf("%s: %s %s/%s deleted", order.name, o.kind, o.namespace, o.name))
		}
	}
}

// docs/install.md's overlay into another namespace with a name prefix (deploy/wiring its
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
			rendered := renderKustomization(t, overlay)
			objs := decodeDocs(t, rendered)
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
			kubectlFor(t, cp)(rendered, "apply", "--server-side", "--field-manager=nodeaddr-install", "-f", "-")
			agent := tokenClient(t, cp, podToken(t, cp, "node-agents", "site-nodeaddr", a))
			otherNode := merge(b, "status", `{"status":{"addresses":[{"type":"ExternalIP","address":"192.0.2.99"}]}}`)
			// The policy takes a moment to be enforced; an unconfined agent's write keeps succeeding
			// (the wait then fails saying so).
			pollWrite(t, agent, otherNode, func(err error) bool { return namesPolicy(err, "site-nodeaddr-own-node") }, "denied by site-nodeaddr-own-node")
			if err := otherNode.do(ctx, agent); !deniedBy(err, "site-nodeaddr-own-node") {
				t.Errorf("agent in node-agents: write to another Node: %v, want a denial by site-nodeaddr-own-node", err)
			}
			own := merge(a, "status", `{"status":{"addresses":[{"type":"ExternalIP","address":"192.0.2.10"},{"type":"Hostname","address":"node-a"}]}}`)
			err := own.do(ctx, agent)
			if c.replacements {
				if err != nil {
					t.Errorf("agent in node-agents: own addresses: %v", err)
				}
				if err := createEvent(ctx, agent, nodeEvent(cp, t, a, "nodeaddr", "AddressesUpdated")); err != nil {
					t.Errorf("agent in node-agents: Event about its Node in default: %v", err)
				}
			} else if !deniedBy(err, "site-nodeaddr-own-node") || !strings.Contains(err.Error(), "rendered for system:serviceaccount:kube-system:nodeaddr") {
				t.Errorf("half-configured: agent's own addresses: %v, want a denial naming the identity the policy was rendered for", err)
			}
			otherWritersWork(t, cp, a, c.name)
		})
	}
}

// Of status.addresses the agent changes only InternalIP and ExternalIP entries, each an IP
// address; Hostname, InternalDNS and ExternalDNS entries stay identical and in place. The kubelet
// still writes any entry.
func TestPolicyAddresses(t *testing.T) {
	harness.RequireE2E(t)
	ctx := context.Background()
	const a, b = "node-a", "node-b"
	base := []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: "node-a"}, {Type: corev1.NodeInternalDNS, Address: "node-a.internal"},
		{Type: corev1.NodeInternalIP, Address: "10.0.0.5"}}
	cp, agent := policyWorld(t, a, b, func(n string) harness.NodeSpec {
		return harness.NodeSpec{Name: n, Addresses: base}
	})
	with := func(extra ...corev1.NodeAddress) []corev1.NodeAddress { return append(slices.Clone(base), extra...) }
	write := func(addrs []corev1.NodeAddress) patch {
		cur := cp.Node(t, a).Status.Addresses
		body, _ := json.Marshal([]map[string]any{
			{"op": "test", "path": "/status/addresses", "value": cur},
			{"op": "replace", "path": "/status/addresses", "value": addrs},
		})
		return patch{node: a, subresource: "status", pt: types.JSONPatchType, body: string(body)}
	}
	ip := func(typ corev1.NodeAddressType, s string) corev1.NodeAddress {
		return corev1.NodeAddress{Type: typ, Address: s}
	}
	for _, c := range []struct {
		name  string
		addrs []corev1.NodeAddress
		ok    bool
	}{
		{"add an IPv4 ExternalIP", with(ip(corev1.NodeExternalIP, "192.0.2.10")), true},
		{"add an IPv6 ExternalIP", with(ip(corev1.NodeExternalIP, "2001:db8::10")), true},
		{"full IPv6 InternalIP", with(ip(corev1.NodeInternalIP, "fd00:1:2:3:4:5:6:7")), true},
		{"replace the InternalIP", []corev1.NodeAddress{base[0], base[1], ip(corev1.NodeInternalIP, "10.0.0.6")}, true},
		{"IPs before the other entries", []corev1.NodeAddress{ip(corev1.NodeInternalIP, "10.0.0.6"), base[0], base[1]}, true},
		{"change the Hostname", []corev1.NodeAddress{ip(corev1.NodeHostName, "evil.example.com"), base[1], base[2]}, false},
		{"drop the InternalDNS", []corev1.NodeAddress{base[0], base[2]}, false},
		{"swap Hostname and InternalDNS", []corev1.NodeAddress{base[1], base[0], base[2]}, false},
		{"add an ExternalDNS", with(ip(corev1.NodeExternalDNS, "evil.example.com")), false},
		{"a name as ExternalIP", with(ip(corev1.NodeExternalIP, "evil.example.com")), false},
		{"an IPv4 out of range", with(ip(corev1.NodeExternalIP, "192.0.2.256")), false},
		{"an IPv4 with a port", with(ip(corev1.NodeExternalIP, "192.0.2.1:22")), false},
		{"a CIDR", with(ip(corev1.NodeInternalIP, "192.0.2.0/24")), false},
		{"an IPv6 with a zone", with(ip(corev1.NodeExternalIP, "fe80::1%eth0")), false},
		{"nine IPs", with(ip(corev1.NodeExternalIP, "192.0.2.1"), ip(corev1.NodeExternalIP, "192.0.2.2"), ip(corev1.NodeExternalIP, "192.0.2.3"),
			ip(corev1.NodeExternalIP, "192.0.2.4"), ip(corev1.NodeExternalIP, "192.0.2.5"), ip(corev1.NodeExternalIP, "192.0.2.6"),
			ip(corev1.NodeExternalIP, "192.0.2.7"), ip(corev1.NodeExternalIP, "192.0.2.8")), false},
	} {
		// Start from base each time (as the kubelet, which may write anything).
		if err := write(base).do(ctx, asKubelet(t, cp, a)); err != nil {
			t.Fatalf("kubelet resets the addresses: %v", err)
		}
		err := write(c.addrs).do(ctx, agent)
		switch {
		case c.ok && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case !c.ok && !deniedByPolicy(err):
			t.Errorf("%s: got %v, want a denial by %s", c.name, err, policyName)
		case !c.ok && err != nil && !strings.Contains(err.Error(), "InternalIP") && !strings.Contains(err.Error(), "ExternalIP"):
			t.Errorf("%s: denial %q does not say what may change", c.name, err)
		}
		if !c.ok {
			// What the agent may not write, the kubelet may.
			if err := write(c.addrs).do(ctx, asKubelet(t, cp, a)); err != nil {
				t.Errorf("%s as the kubelet: %v", c.name, err)
			}
		}
	}
}

func nodeEvent(cp *harness.ControlPlane, t *testing.T, node, component, reason string) *corev1.Event {
	t.Helper()
	n := cp.Node(t, node)
	return &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: node + ".", Namespace: "default"},
		InvolvedObject: corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: node, UID: n.UID},
		Reason:         reason, Message: "Addresses changed", Type: corev1.EventTypeNormal, Count: 1,
		Source:         corev1.EventSource{Component: component, Host: node},
		FirstTimestamp: metav1.Now(), LastTimestamp: metav1.Now(),
	}
}

func createEvent(ctx context.Context, cs kubernetes.Interface, ev *corev1.Event) error {
	_, err := cs.CoreV1().Events(ev.Namespace).Create(ctx, ev, metav1.CreateOptions{})
	return err
}

// The agent writes core/v1 Events in default only (RBAC), about its own Node, as component
// nodeaddr from its node, of bounded size (policy); an administrator writes any Event.
func TestPolicyEvents(t *testing.T) {
	harness.RequireE2E(t)
	ctx := context.Background()
	const a, b = "node-a", "node-b"
	cp, agent := policyWorld(t, a, b, func(n string) harness.NodeSpec { return harness.NodeSpec{Name: n} })
	good := nodeEvent(cp, t, a, "nodeaddr", "AddressesUpdated")
	// The events policy reaches the admission chain within moments, like the Node policy.
	bad := good.DeepCopy()
	bad.InvolvedObject.Name, bad.InvolvedObject.UID = b, cp.Node(t, b).UID
	for deadline := time.Now().Add(10 * time.Second); !deniedBy(createEvent(ctx, agent, bad), eventsPolicyName); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Errorf("the events policy is not enforced within 10s")
			break
		}
	}
	created, err := agent.CoreV1().Events("default").Create(ctx, good, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("agent's Event about its own Node: %v", err)
	}
	// The recorder aggregates repeats with a strategic merge patch.
	if _, err := agent.CoreV1().Events("default").Patch(ctx, created.Name, types.StrategicMergePatchType,
		[]byte(`{"count":2,"message":"Addresses changed again"}`), metav1.PatchOptions{}); err != nil {
		t.Errorf("agent's patch of its Event: %v", err)
	}
	long := strings.Repeat("x", 1025)
	for _, c := range []struct {
		name   string
		edit   func(*corev1.Event)
		policy bool // denied by the policy (else by RBAC)
	}{
		{"about another Node", func(e *corev1.Event) { e.InvolvedObject.Name = b; e.InvolvedObject.UID = cp.Node(t, b).UID }, true},
		{"about a Pod", func(e *corev1.Event) {
			e.InvolvedObject = corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "victim", APIVersion: "v1"}
		}, true},
		{"posing as the kubelet", func(e *corev1.Event) { e.Source.Component = "kubelet" }, true},
		{"posing as another host", func(e *corev1.Event) { e.Source.Host = b }, true},
		{"reporting as the scheduler", func(e *corev1.Event) { e.ReportingController = "default-scheduler" }, true},
		{"a message over 1 KiB", func(e *corev1.Event) { e.Message = long }, true},
		{"with annotations", func(e *corev1.Event) { e.Annotations = map[string]string{"x": "y"} }, true},
		{"in kube-system", func(e *corev1.Event) {
			e.Namespace = "kube-system"
			e.InvolvedObject = corev1.ObjectReference{Kind: "Pod", Namespace: "kube-system", Name: "x", APIVersion: "v1"}
		}, false},
	} {
		ev := good.DeepCopy()
		c.edit(ev)
		err := createEvent(ctx, agent, ev)
		if c.policy && !deniedBy(err, eventsPolicyName) || !c.policy && !deniedByRBAC(err) {
			t.Errorf("agent's Event %s: got %v, want a denial by %s", c.name, err, map[bool]string{true: eventsPolicyName, false: "RBAC"}[c.policy])
		}
		// An administrator may write it.
		if err := createEvent(ctx, cp.Admin, ev); err != nil {
			t.Errorf("administrator's Event %s: %v", c.name, err)
		}
	}
	// The patch path is confined too.
	if _, err := agent.CoreV1().Events("default").Patch(ctx, created.Name, types.StrategicMergePatchType,
		[]byte(fmt.Sprintf(`{"message":%q}`, long)), metav1.PatchOptions{}); !deniedBy(err, eventsPolicyName) {
		t.Errorf("agent's patch to a long message: %v, want a denial by %s", err, eventsPolicyName)
	}
	// events.k8s.io is not granted.
	ev1 := &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{GenerateName: a + "-", Namespace: "default"},
		EventTime:  metav1.NowMicro(), ReportingController: "nodeaddr", ReportingInstance: a,
		Action: "Update", Reason: "AddressesUpdated", Type: corev1.EventTypeNormal, Note: "x",
		Regarding: corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: a, UID: cp.Node(t, a).UID},
	}
	if _, err = agent.EventsV1().Events("default").Create(ctx, ev1, metav1.CreateOptions{}); !deniedByRBAC(err) {
		t.Errorf("agent's events.k8s.io Event: %v, want a refusal by RBAC", err)
	}
	if _, err = cp.Admin.EventsV1().Events("default").Create(ctx, ev1, metav1.CreateOptions{}); err != nil {
		t.Errorf("administrator's events.k8s.io Event: %v", err)
	}
}

// nodeaddr.io/ annotations are bounded in number, key and value size (an administrator is
// not bound), and the agent cannot rewrite other managers' managedFields (nor write as another
// manager); the kubelet's entry stays.
func TestPolicyNodeBloat(t *testing.T) {
	harness.RequireE2E(t)
	ctx := context.Background()
	const a, b = "node-a", "node-b"
	cp, agent := policyWorld(t, a, b, func(n string) harness.NodeSpec {
		return harness.NodeSpec{Name: n, Addresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: n}}}
	})
	annotations := func(n int, valueLen int) string {
		m := map[string]string{}
		for i := range n {
			m[fmt.Sprintf("nodeaddr.io/k%d", i)] = strings.Repeat("1", valueLen)
		}
		b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": m}})
		return string(b)
	}
	clear := func() {
		t.Helper()
		m := map[string]any{}
		for i := range 9 {
			m[fmt.Sprintf("nodeaddr.io/k%d", i)] = nil
		}
		body, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": m}})
		p := merge(a, "", string(body))
		p.manager = "kubectl-annotate"
		if err := p.do(ctx, cp.Admin); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("annotations", func(t *testing.T) {
		if err := merge(a, "", annotations(4, 55)).do(ctx, agent); err != nil {
			t.Errorf("4 nodeaddr.io/ annotations of 55 characters (a v4,v6 pair): %v", err)
		}
		for _, c := range []struct {
			name, body, why string
		}{
			{"9 nodeaddr.io/ annotations", annotations(9, 1), "at most 8 nodeaddr.io/ annotations"},
			{"a 129-character value", annotations(1, 129), "at most 128"},
		} {
			clear()
			err := merge(a, "", c.body).do(ctx, agent)
			if !deniedByPolicy(err) || !strings.Contains(err.Error(), c.why) {
				t.Errorf("%s: got %v, want a denial by %s saying %q", c.name, err, policyName, c.why)
			}
			admin := merge(a, "", c.body)
			admin.manager = "kubectl-annotate"
			if err := admin.do(ctx, cp.Admin); err != nil {
				t.Errorf("%s as administrator: %v", c.name, err)
			}
		}
		clear()
	})

	t.Run("managedFields", func(t *testing.T) {
		// The kubelet owns a condition and the addresses; an administrator owns a label.
		kubelet := merge(a, "status", `{"status":{"addresses":[{"type":"Hostname","address":"node-a"},{"type":"InternalIP","address":"10.0.0.5"}],"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady"}]}}`)
		kubelet.manager = "kubelet"
		// A server-side apply (a label, as kubectl apply --server-side would set it): an object
		// created and updated without one may carry no managedFields on this API server.
		if _, err := cp.Admin.CoreV1().Nodes().Patch(ctx, a, types.ApplyPatchType,
			[]byte(`{"apiVersion":"v1","kind":"Node","metadata":{"name":"node-a","labels":{"example.com/role":"db"}}}`),
			metav1.PatchOptions{FieldManager: "kubectl-label"}); err != nil {
			t.Fatal(err)
		}
		if err := kubelet.do(ctx, asKubelet(t, cp, a)); err != nil {
			t.Fatal(err)
		}
		if err := merge(a, "status", `{"status":{"addresses":[{"type":"ExternalIP","address":"192.0.2.10"},{"type":"Hostname","address":"node-a"}]}}`).do(ctx, agent); err != nil {
			t.Fatalf("agent's addresses (taken over from the kubelet): %v", err)
		}
		managed := cp.Node(t, a).ManagedFields
		if !slices.ContainsFunc(managed, func(e metav1.ManagedFieldsEntry) bool { return e.Manager == "kubelet" }) ||
			!slices.ContainsFunc(managed, func(e metav1.ManagedFieldsEntry) bool { return e.Manager == "nodeaddr" }) {
			t.Fatalf("managedFields lack the kubelet's or nodeaddr's entry: %+v", managed)
		}
		without := func(drop string) []metav1.ManagedFieldsEntry {
			return slices.DeleteFunc(slices.Clone(managed), func(e metav1.ManagedFieldsEntry) bool { return e.Manager == drop })
		}
		extended := slices.Clone(managed)
		for i := range extended {
			if extended[i].Manager == "kubelet" {
				extended[i].FieldsV1 = &metav1.FieldsV1{Raw: []byte(`{"f:status":{"f:conditions":{".":{}},"f:addresses":{".":{}},"f:images":{}}}`)}
			}
		}
		renamed := slices.Clone(managed)
		for i := range renamed {
			if renamed[i].Manager == "kubectl-label" {
				renamed[i].Manager = "someone-else"
			}
		}
		mfPatch := func(entries []metav1.ManagedFieldsEntry) patch {
			body, _ := json.Marshal([]map[string]any{{"op": "replace", "path": "/metadata/managedFields", "value": entries},
				{"op": "add", "path": "/metadata/annotations", "value": map[string]string{"nodeaddr.io/k0": time.Now().String()}}})
			return patch{node: a, pt: types.JSONPatchType, body: string(body)}
		}
		claimed := slices.Clone(managed)
		for i := range claimed {
			if claimed[i].Manager == "nodeaddr" {
				claimed[i].FieldsV1 = &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:labels":{"f:example.com/role":{}}}}`)}
			}
		}
		asKubeletManager := merge(a, "status", `{"status":{"addresses":[{"type":"ExternalIP","address":"192.0.2.11"},{"type":"Hostname","address":"node-a"}]}}`)
		asKubeletManager.manager = "kubelet"
		// The same kind of write, sending the managedFields as they are, is the agent's own business.
		if err := mfPatch(managed).do(ctx, agent); err != nil {
			t.Errorf("sending the managedFields unchanged: %v", err)
		}
		managed = cp.Node(t, a).ManagedFields
		for _, c := range []struct {
			name string
			p    patch
		}{
			{"reset managedFields", mfPatch([]metav1.ManagedFieldsEntry{})},
			{"drop the kubelet's entry", mfPatch(without("kubelet"))},
			{"drop the label's entry", mfPatch(without("kubectl-label"))},
			{"add fields to the kubelet's entry", mfPatch(extended)},
			{"rename another manager's entry", mfPatch(renamed)},
			{"write as the kubelet's field manager", asKubeletManager},
			{"claim a label in its own entry", mfPatch(claimed)},
		} {
			why := "other managers"
			if strings.HasPrefix(c.name, "claim") {
				why = "own managedFields"
			}
			if err := c.p.do(ctx, agent); !deniedByPolicy(err) || !strings.Contains(err.Error(), why) {
				t.Errorf("%s: got %v, want a denial by %s about %s", c.name, err, policyName, why)
			}
		}
		if after := cp.Node(t, a); !slices.ContainsFunc(after.ManagedFields, func(e metav1.ManagedFieldsEntry) bool { return e.Manager == "kubelet" }) {
			t.Errorf("the kubelet's managedFields entry is gone: %+v", after.ManagedFields)
		}
	})
}

// A token bound to a pod on a Node that was deleted and recreated under the same name (the
// pod, and so the token, outlived it) is denied; a token for the new Node is not.
func TestPolicyRecreatedNode(t *testing.T) {
	harness.RequireE2E(t)
	ctx := context.Background()
	const a, b = "node-a", "node-b"
	cp, agent := policyWorld(t, a, b, func(n string) harness.NodeSpec {
		return harness.NodeSpec{Name: n, Addresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: n}}}
	})
	own := merge(a, "status", `{"status":{"addresses":[{"type":"ExternalIP","address":"192.0.2.10"},{"type":"Hostname","address":"node-a"}]}}`)
	if err := own.do(ctx, agent); err != nil {
		t.Fatalf("before: %v", err)
	}
	if err := cp.Admin.CoreV1().Nodes().Delete(ctx, a, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	cp.CreateNode(t, harness.NodeSpec{Name: a, Addresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: a}}})
	err := own.do(ctx, agent)
	if !deniedByPolicy(err) || !strings.Contains(err.Error(), "deleted and recreated") {
		t.Errorf("old token on the recreated Node: %v, want a denial naming the recreated Node", err)
	}
	// (The events policy may reach the admission chain a moment after the Node policy.)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		err := createEvent(ctx, agent, nodeEvent(cp, t, a, "nodeaddr", "AddressesUpdated"))
		if deniedBy(err, eventsPolicyName) {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("old token's Event about the recreated Node: %v, want a denial by %s", err, eventsPolicyName)
			break
		}
	}
	if err := own.do(ctx, agentClient(t, cp, a)); err != nil {
		t.Errorf("new pod's token on the recreated Node: %v", err)
	}
	otherWritersWork(t, cp, a, "recreated Node")
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
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if created, err = cp.Admin.CoreV1().Pods("kube-system").Create(ctx, pod, metav1.CreateOptions{}); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(created.Spec.Volumes) != 1 {
		t.Errorf("pod volumes %+v: want only kube-api-access", created.Spec.Volumes)
	}
	checkTokenProjection(t, created.Spec)
	exp := *created.Spec.Volumes[0].Projected.Sources[0].ServiceAccountToken.ExpirationSeconds
	tok := podToken(t, cp, "kube-system", "nodeaddr", "node-a")
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
	rendered := helmTemplate(t, "--namespace", "other")
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
	kubectlFor(t, cp)(rendered, "apply", "--server-side", "--field-manager=helm", "-f", "-")
	agent := tokenClient(t, cp, podToken(t, cp, "other", "nodeaddr", a))
	otherNode := merge(b, "status", `{"status":{"addresses":[{"type":"ExternalIP","address":"192.0.2.99"}]}}`)
	waitPolicyEffective(t, agent, otherNode)
	if err := otherNode.do(ctx, agent); !deniedByPolicy(err) {
		t.Errorf("agent in other: write to another Node: %v, want a denial by %s", err, policyName)
	}
	if err := merge(a, "status", `{"status":{"addresses":[{"type":"ExternalIP","address":"192.0.2.10"},{"type":"Hostname","address":"node-a"}]}}`).do(ctx, agent); err != nil {
		t.Errorf("agent in other: own addresses: %v", err)
	}
	otherWritersWork(t, cp, a, "chart in other")
}
