package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// The admission policies' limits on what the agent's token writes beyond its addresses: Events
// (only its own, every field bounded), managedFields (ancient-changes entries included) and the
// syntax of the addresses it publishes; each write a compromised agent could try is denied.
// docs/security.md cites them. SubjectAccessReviews cannot be limited by a policy
// (TestSubjectAccessReviewsEscapeAdmission); the agent asks none: TestAgentAsksNoSubjectAccessReview.

// mib is a 1 MiB string, the size of an Event field a compromised agent would store if it could.
var mib = strings.Repeat("x", 1<<20)

// waitEventsPolicy waits until the events policy denies the agent an Event about node b: it
// reaches the admission chain a moment after the Node policy policyWorld waits for.
func waitEventsPolicy(t *testing.T, cp *harness.ControlPlane, agent kubernetes.Interface, a, b string) {
	t.Helper()
	bad := nodeEvent(cp, t, a, "nodeaddr", "AddressesUpdated")
	bad.InvolvedObject.Name, bad.InvolvedObject.UID = b, cp.Node(t, b).UID
	for deadline := time.Now().Add(10 * time.Second); !deniedBy(createEvent(context.Background(), agent, bad), eventsPolicyName); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the events policy is not enforced within 10s")
		}
	}
}

// The agent patches only Events that already are its own (about its Node, from
// nodeaddr): it cannot rewrite the kubelet's Event about another Node into one about its own, nor
// the kubelet's Event about its own Node; the recorder's own aggregation patch still works.
func TestPolicyEventUpdates(t *testing.T) {
	harness.RequireE2E(t)
	ctx := context.Background()
	const a, b = "node-a", "node-b"
	cp, agent := policyWorld(t, a, b, func(n string) harness.NodeSpec { return harness.NodeSpec{Name: n} })
	waitEventsPolicy(t, cp, agent, a, b)
	kubeletEvent := func(node string) *corev1.Event {
		ev := nodeEvent(cp, t, node, "kubelet", "Rebooted")
		ev.Type, ev.Message = corev1.EventTypeWarning, "Node "+node+" has been rebooted, boot id: 1234"
		created, err := asKubelet(t, cp, node).CoreV1().Events("default").Create(ctx, ev, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("the kubelet's Event about %s: %v", node, err)
		}
		return created
	}
	evidence := fmt.Sprintf(`{"involvedObject":{"name":%q,"uid":%q},"source":{"component":"nodeaddr","host":%q},"reason":"AddressesUpdated","type":"Normal","message":"nothing happened"}`,
		a, cp.Node(t, a).UID, a)
	for _, c := range []struct{ name, node, body string }{
		{"rewrite the kubelet's Event about another Node into one about its own", b, evidence},
		{"turn the kubelet's Event about its own Node into its own", a, fmt.Sprintf(`{"source":{"component":"nodeaddr","host":%q},"message":"nothing happened"}`, a)},
	} {
		ev := kubeletEvent(c.node)
		_, err := agent.CoreV1().Events("default").Patch(ctx, ev.Name, types.StrategicMergePatchType, []byte(c.body), metav1.PatchOptions{})
		if !deniedBy(err, eventsPolicyName) || !strings.Contains(err.Error(), "already") {
			t.Errorf("%s: got %v, want a denial by %s naming Events that already are its own", c.name, err, eventsPolicyName)
		}
		after, err := cp.Admin.CoreV1().Events("default").Get(ctx, ev.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if after.Message != ev.Message || after.InvolvedObject.Name != c.node || after.Source.Component != "kubelet" {
			t.Errorf("%s: the kubelet's Event now reads %s/%s from %s: %q", c.name, after.InvolvedObject.Kind, after.InvolvedObject.Name,
				after.Source.Component, after.Message)
		}
	}
	// The recorder's aggregation of a repeat: count, lastTimestamp and message of its own Event.
	own, err := agent.CoreV1().Events("default").Create(ctx, nodeEvent(cp, t, a, "nodeaddr", "AddressesUpdated"), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("agent's Event about its own Node: %v", err)
	}
	repeat := fmt.Sprintf(`{"count":2,"lastTimestamp":%q,"message":"Addresses changed again"}`, time.Now().UTC().Format(time.RFC3339))
	if _, err := agent.CoreV1().Events("default").Patch(ctx, own.Name, types.StrategicMergePatchType, []byte(repeat), metav1.PatchOptions{}); err != nil {
		t.Errorf("the recorder's patch of its own Event: %v", err)
	}
}

// Every free-text field of the agent's Events is bounded, on create and on patch, and so
// are the managedFields and finalizers a client may send with them.
func TestPolicyEventFieldBounds(t *testing.T) {
	harness.RequireE2E(t)
	ctx := context.Background()
	const a, b = "node-a", "node-b"
	cp, agent := policyWorld(t, a, b, func(n string) harness.NodeSpec { return harness.NodeSpec{Name: n} })
	waitEventsPolicy(t, cp, agent, a, b)
	good := nodeEvent(cp, t, a, "nodeaddr", "AddressesUpdated")
	bulk := map[string]any{}
	for i := range 20000 {
		bulk[fmt.Sprintf("f:x-%05d", i)] = map[string]any{}
	}
	bulkFields, _ := json.Marshal(map[string]any{"f:metadata": map[string]any{"f:labels": bulk}})
	for _, c := range []struct {
		name string
		edit func(*corev1.Event)
	}{
		{"a 1 MiB type", func(e *corev1.Event) { e.Type = mib }},
		{"a type neither Normal nor Warning", func(e *corev1.Event) { e.Type = "Critical" }},
		{"a 1 MiB involvedObject.fieldPath", func(e *corev1.Event) { e.InvolvedObject.FieldPath = mib }},
		{"a 1 MiB involvedObject.resourceVersion", func(e *corev1.Event) { e.InvolvedObject.ResourceVersion = mib }},
		{"a 1 MiB reportingInstance", func(e *corev1.Event) { e.ReportingInstance = mib }},
		{"2000 finalizers", func(e *corev1.Event) {
			for i := range 2000 {
				e.Finalizers = append(e.Finalizers, fmt.Sprintf("example.com/f%d", i))
			}
		}},
		{"a managedFields entry of 20000 fields", func(e *corev1.Event) {
			e.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "nodeaddr", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
				Time: &metav1.Time{Time: time.Now()}, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: bulkFields}}}
		}},
	} {
		ev := good.DeepCopy()
		c.edit(ev)
		if err := createEvent(ctx, agent, ev); !deniedBy(err, eventsPolicyName) {
			t.Errorf("agent's Event with %s: got %v, want a denial by %s", c.name, errSummary(err), eventsPolicyName)
		}
	}
	own, err := agent.CoreV1().Events("default").Create(ctx, good, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("agent's Event about its own Node: %v", err)
	}
	for _, c := range []struct{ name, body string }{
		{"a 1 MiB type", fmt.Sprintf(`{"type":%q}`, mib)},
		{"a 1 MiB involvedObject.fieldPath", fmt.Sprintf(`{"involvedObject":{"fieldPath":%q}}`, mib)},
	} {
		_, err := agent.CoreV1().Events("default").Patch(ctx, own.Name, types.StrategicMergePatchType, []byte(c.body), metav1.PatchOptions{})
		if !deniedBy(err, eventsPolicyName) {
			t.Errorf("agent's patch of its Event to %s: got %v, want a denial by %s", c.name, errSummary(err), eventsPolicyName)
		}
	}
	after, err := cp.Admin.CoreV1().Events("default").Get(ctx, own.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if raw, _ := json.Marshal(after); len(raw) > 4096 {
		t.Errorf("the agent's Event grew to %d bytes", len(raw))
	}
}

// errSummary shortens an error that may quote a megabyte.
func errSummary(err error) string {
	if err == nil {
		return "<nil>"
	}
	if s := err.Error(); len(s) > 300 {
		return s[:300] + "..."
	}
	return err.Error()
}

// managedFields entries named ancient-changes obey the rules of every other manager's: the agent
// cannot add one (such a JSON patch, unchecked, grew a Node from 1.7 KB to 880 KB), nor extend
// one the server made, nor hide fields below the depth checked before (under another manager's
// annotation, or in its own entry). The server's own merge into
// ancient-changes, which the agent's first write triggers on a Node with ten Update managers, is
// still accepted.
func TestPolicyManagedFieldsBounded(t *testing.T) {
	harness.RequireE2E(t)
	ctx := context.Background()
	const a, b = "node-a", "node-b"
	cp, agent := policyWorld(t, a, b, func(n string) harness.NodeSpec {
		return harness.NodeSpec{Name: n, Addresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: n}},
			Annotations: map[string]string{"example.com/owner": "ops"}}
	})
	// A first server-side apply makes the API server track managedFields (TestPolicyNodeBloat).
	if _, err := cp.Admin.CoreV1().Nodes().Patch(ctx, a, types.ApplyPatchType,
		[]byte(`{"apiVersion":"v1","kind":"Node","metadata":{"name":"node-a","labels":{"example.com/role":"db"}}}`),
		metav1.PatchOptions{FieldManager: "kubectl-label"}); err != nil {
		t.Fatal(err)
	}
	kubelet := merge(a, "status", `{"status":{"addresses":[{"type":"Hostname","address":"node-a"},{"type":"InternalIP","address":"10.0.0.5"}]}}`)
	kubelet.manager = "kubelet"
	if err := kubelet.do(ctx, asKubelet(t, cp, a)); err != nil {
		t.Fatal(err)
	}
	// The agent's first write (nodes/status): two Update managers so far.
	if err := merge(a, "status", `{"status":{"addresses":[{"type":"Hostname","address":"node-a"},{"type":"InternalIP","address":"10.0.0.5"},{"type":"ExternalIP","address":"192.0.2.10"}]}}`).do(ctx, agent); err != nil {
		t.Fatalf("the agent's addresses: %v", err)
	}
	bulk := map[string]any{}
	for i := range 20000 {
		bulk[fmt.Sprintf("f:example.com/x-%05d", i)] = map[string]any{}
	}
	attempt := func(name string, entries []metav1.ManagedFieldsEntry) {
		t.Helper()
		body := mustJSON(t, []map[string]any{{"op": "replace", "path": "/metadata/managedFields", "value": entries},
			{"op": "add", "path": "/metadata/annotations/nodeaddr.io~1k0", "value": time.Now().String()}})
		before := cp.Node(t, a)
		err := patch{node: a, pt: types.JSONPatchType, body: string(body)}.do(ctx, agent)
		if !deniedByPolicy(err) || !strings.Contains(err.Error(), "managedFields") {
			t.Errorf("%s: got %v, want a denial by %s about managedFields", name, errSummary(err), policyName)
		}
		if after := cp.Node(t, a); after.ResourceVersion != before.ResourceVersion {
			t.Errorf("%s: the Node changed from %d to %d bytes", name, nodeSize(t, before), nodeSize(t, after))
		}
	}
	// The bloating patch, on a Node without an ancient-changes entry.
	attempt("add an ancient-changes entry of 20000 fields", append(slices.Clone(cp.Node(t, a).ManagedFields), metav1.ManagedFieldsEntry{
		Manager: "ancient-changes", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &metav1.Time{Time: time.Now()},
		FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: mustJSON(t, map[string]any{"f:metadata": map[string]any{"f:labels": bulk}})}}))

	// Eight more Update managers, ten in all: the agent's first write through nodes is the eleventh,
	// and the server merges the two oldest into ancient-changes.
	for i := range 8 {
		p := merge(a, "", fmt.Sprintf(`{"metadata":{"annotations":{"example.com/m%d":"x"}}}`, i))
		p.manager = fmt.Sprintf("manager-%d", i)
		if err := p.do(ctx, cp.Admin); err != nil {
			t.Fatal(err)
		}
	}
	if err := merge(a, "", `{"metadata":{"annotations":{"nodeaddr.io/published":"192.0.2.10"}}}`).do(ctx, agent); err != nil {
		t.Fatalf("the agent's first write through nodes, which makes the server merge into ancient-changes: %v", err)
	}
	before := cp.Node(t, a)
	managed := before.ManagedFields
	if !slices.ContainsFunc(managed, func(e metav1.ManagedFieldsEntry) bool { return e.Manager == "ancient-changes" }) {
		t.Fatalf("the server made no ancient-changes entry: %+v", managed)
	}
	sizeBefore := nodeSize(t, before)
	// edited returns managed with the fields of the first entry that pick selects replaced by edit's.
	edited := func(pick func(metav1.ManagedFieldsEntry) bool, edit func(map[string]any)) []metav1.ManagedFieldsEntry {
		out := slices.Clone(managed)
		i := slices.IndexFunc(out, pick)
		if i < 0 {
			t.Fatalf("no such managedFields entry in %+v", managed)
		}
		var m map[string]any
		if err := json.Unmarshal(out[i].FieldsV1.Raw, &m); err != nil {
			t.Fatal(err)
		}
		edit(m)
		out[i].FieldsV1 = &metav1.FieldsV1{Raw: mustJSON(t, m)}
		return out
	}
	attempt("extend the server's ancient-changes entry", edited(func(e metav1.ManagedFieldsEntry) bool { return e.Manager == "ancient-changes" },
		func(m map[string]any) { m["f:metadata"] = map[string]any{"f:labels": bulk} }))
	// Four levels down, under a key the entry already names (an annotation of manager-7's).
	attempt("add 20000 fields under another manager's annotation", edited(func(e metav1.ManagedFieldsEntry) bool { return e.Manager == "manager-7" },
		func(m map[string]any) {
			m["f:metadata"].(map[string]any)["f:annotations"].(map[string]any)["f:example.com/m7"] = bulk
		}))
	// Five levels down in its own entry (through nodes, the newest entry, which the merge never takes).
	attempt("add 20000 fields under its own annotation", edited(func(e metav1.ManagedFieldsEntry) bool {
		return e.Manager == "nodeaddr" && e.Subresource == ""
	}, func(m map[string]any) {
		m["f:metadata"].(map[string]any)["f:annotations"].(map[string]any)["f:nodeaddr.io/published"] = map[string]any{"f:x": bulk}
	}))
	if after := cp.Node(t, a); after.ResourceVersion != before.ResourceVersion {
		t.Errorf("the denied writes changed the Node: %d bytes before, %d after", sizeBefore, nodeSize(t, after))
	}
	if sizeBefore > 8192 {
		t.Errorf("the Node is %d bytes after the agent's own writes", sizeBefore)
	}
}

func nodeSize(t *testing.T, n *corev1.Node) int {
	t.Helper()
	return len(mustJSON(t, n))
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// acceptableNodeIP is what the policy must accept as a new InternalIP or ExternalIP: what Go's
// netip.ParseAddr parses, without a zone, and neither unspecified, loopback, link-local,
// multicast nor IPv4-mapped.
func acceptableNodeIP(s string) bool {
	ip, err := netip.ParseAddr(s)
	return err == nil && ip.Zone() == "" && !ip.IsUnspecified() && !ip.IsLoopback() && !ip.IsLinkLocalUnicast() &&
		!ip.IsMulticast() && !ip.Is4In6()
}

// nodeIPInputs are the table's named inputs (malformed and special-purpose addresses and their
// neighbours).
var nodeIPInputs = []string{
	// What nodeaddr publishes in the tests and the documentation ranges.
	"192.0.2.10", "10.0.0.1", "172.16.0.1", "100.64.0.1", "198.51.100.7", "255.255.255.255", "2001:db8::1", "fd00::2",
	"2001:4860:4860::8888", "2001:DB8::A", "0001:0db8:0000::1", "1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7::", "::2:3:4:5:6:7:8",
	"64:ff9b::192.0.2.1", "1:2:3:4:5:6:192.0.2.1", "1:2:3:4:5::192.0.2.1", "::1.2.3.4", "fec0::1",
	// Malformed: nine groups with an ellipsis, and other malformed ones.
	"1::2:3:4:5:6:7:8", "1:2:3:4:5:6:7:8:9", "1:2:3:4:5:6:7", "1:2:3:4:5:6::192.0.2.1", "1:2:3:4:5:6:7:192.0.2.1",
	"12345::1", ":::", "1:::2", "::1.2.3", "g::1", "[::1]", ":1::2", "1::2:", "", " 192.0.2.1", "192.0.2.1\n",
	"01.2.3.4", "1.2.3.04", "192.0.2.256", "1.2.3", "1.2.3.4.5", "::ffff:01.2.3.4", "fe80::1%eth0", "2001:db8::1%1",
	// Special-purpose addresses.
	"127.0.0.1", "127.1.2.3", "0.0.0.0", "169.254.169.254", "224.0.0.1", "239.255.255.250", "::", "::1",
	"0:0:0:0:0:0:0:1", "0::0", "::0.0.0.0", "::0.0.0.1", "fe80::1", "FEBF::1", "ff02::1", "ff00::", "::ffff:7f00:1",
	"::ffff:1.2.3.4", "0:0:0:0:0:ffff:102:304", "::ffff:0:0", "0:0::FFFF:0.0.0.0",
}

// generatedNodeIPs are IPv6 shapes by number of groups before and after an ellipsis, with and
// without an embedded IPv4 tail, so that the syntax is compared at every count.
func generatedNodeIPs() []string {
	groups := func(n, first int) []string {
		var g []string
		for i := range n {
			g = append(g, fmt.Sprintf("%x", first+i))
		}
		return g
	}
	var out []string
	for _, tail := range []string{"", "192.0.2.1"} {
		for k := 0; k <= 9; k++ {
			plain := groups(k, 0x2001)
			if tail != "" {
				plain = append(plain, tail)
			}
			out = append(out, strings.Join(plain, ":"))
			for m := 0; m+k <= 9; m++ {
				right := groups(m, 0xa)
				if tail != "" {
					right = append(right, tail)
				}
				out = append(out, strings.Join(groups(k, 0x2001), ":")+"::"+strings.Join(right, ":"))
			}
		}
	}
	return out
}

// The policy accepts as an InternalIP or ExternalIP exactly what
// acceptableNodeIP does, for every named and generated input, on the real API server.
func TestPolicyAddressSyntaxMatchesGo(t *testing.T) {
	harness.RequireE2E(t)
	ctx := context.Background()
	const a, b = "node-a", "node-b"
	base := []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: a}}
	cp, agent := policyWorld(t, a, b, func(n string) harness.NodeSpec { return harness.NodeSpec{Name: n, Addresses: base} })
	write := func(addrs []corev1.NodeAddress) patch {
		body := mustJSON(t, []map[string]any{
			{"op": "test", "path": "/status/addresses", "value": cp.Node(t, a).Status.Addresses},
			{"op": "replace", "path": "/status/addresses", "value": addrs},
		})
		return patch{node: a, subresource: "status", pt: types.JSONPatchType, body: string(body)}
	}
	inputs := append(slices.Clone(nodeIPInputs), generatedNodeIPs()...)
	accepted, disagree := 0, 0
	for i, s := range inputs {
		kinds := []corev1.NodeAddressType{corev1.NodeInternalIP, corev1.NodeExternalIP}
		if i >= len(nodeIPInputs) {
			kinds = kinds[i%2 : i%2+1]
		}
		want := acceptableNodeIP(s)
		for _, typ := range kinds {
			err := write(append(slices.Clone(base), corev1.NodeAddress{Type: typ, Address: s})).do(ctx, agent)
			switch {
			case want && err != nil:
				disagree++
				t.Errorf("%s %q: Go accepts it, the policy denies it: %v", typ, s, err)
			case !want && !deniedByPolicy(err):
				disagree++
				t.Errorf("%s %q: Go refuses it, the policy: %v", typ, s, err)
			case want:
				accepted++
				if err := write(base).do(ctx, asKubelet(t, cp, a)); err != nil {
					t.Fatalf("the kubelet resets the addresses: %v", err)
				}
			}
		}
	}
	t.Logf("%d inputs, %d writes accepted, %d disagreements", len(inputs), accepted, disagree)
}

// The policy's IP syntax (its variables ipv4Syntax and ipv6Syntax, RE2 as CEL's matches() runs them)
// accepts exactly what netip.ParseAddr accepts without a zone, over many more inputs than the API
// server table: random strings of address-like pieces and every group count around an ellipsis.
func TestPolicyIPSyntaxMatchesNetip(t *testing.T) {
	data, err := os.ReadFile(deployFile("admission-policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := harness.DecodeManifests(data)
	if err != nil {
		t.Fatal(err)
	}
	res := map[string]*regexp.Regexp{}
	for _, o := range objs {
		p, ok := o.(*admissionv1.ValidatingAdmissionPolicy)
		if !ok || p.Name != policyName {
			continue
		}
		for _, v := range p.Spec.Variables {
			if v.Name == "ipv4Syntax" || v.Name == "ipv6Syntax" {
				res[v.Name] = regexp.MustCompile(strings.Trim(strings.TrimSpace(v.Expression), "'"))
			}
		}
	}
	if len(res) != 2 {
		t.Fatalf("policy %s lacks the variables ipv4Syntax and ipv6Syntax: %v", policyName, res)
	}
	pieces := []string{"0", "1", "00", "0000", "ffff", "FFFF", "a", "12345", "255", "256", "01", ":", "::", ".", "1.2.3.4",
		"0.0.0.0", "fe80", "%", "g", " "}
	r := rand.New(rand.NewPCG(31, 1))
	inputs := append(slices.Clone(nodeIPInputs), generatedNodeIPs()...)
	for range 300000 {
		var b strings.Builder
		for j := r.IntN(14); j >= 0; j-- {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		inputs = append(inputs, b.String())
	}
	valid, wrong := 0, 0
	for _, s := range inputs {
		ip, err := netip.ParseAddr(s)
		want := err == nil && ip.Zone() == ""
		if want {
			valid++
		}
		if got := res["ipv4Syntax"].MatchString(s) || res["ipv6Syntax"].MatchString(s); got != want {
			if wrong++; wrong <= 20 {
				t.Errorf("%q: netip accepts it: %v, the policy's syntax: %v", s, want, got)
			}
		}
	}
	t.Logf("%d inputs, %d valid addresses, %d disagreements", len(inputs), valid, wrong)
}

// The agent's SubjectAccessReviews cannot be denied by an admission policy: since Kubernetes 1.30
// the API server exempts SubjectAccessReviews from ValidatingAdmissionPolicies (kubernetes#123543).
// A policy that denies the agent every SubjectAccessReview and every Event denies its Events, and
// still lets its question whether kube-system:default may list Secrets through. docs/security.md
// says so; if a release changes this, this test fails and the policy becomes possible.
func TestSubjectAccessReviewsEscapeAdmission(t *testing.T) {
	harness.RequireE2E(t)
	ctx := context.Background()
	const a, b = "node-a", "node-b"
	cp, agent := policyWorld(t, a, b, func(n string) harness.NodeSpec { return harness.NodeSpec{Name: n} })
	// The RBAC of an install that authorizes scrapers by SubjectAccessReview (an empty
	// metrics-allowed-scrapers); the shipped one grants none (TestAgentAsksNoSubjectAccessReview).
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
	for deadline := time.Now().Add(10 * time.Second); !deniedBy(createEvent(ctx, agent, nodeEvent(cp, t, a, "nodeaddr", "AddressesUpdated")), name); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("policy %s is not enforced on Events within 10s", name)
		}
	}
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
