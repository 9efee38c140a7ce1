package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// Table is the admission policy's answers, one line a case: {name, who sends, what write, the
// answer}. Every case starts from its own pair of Nodes of NodeSpec ($OWN, where the agent's pod
// runs, and $OTHER); a denied write must leave the Nodes (or the Event) it aimed at unchanged.
// Add a line to the group of its subject; test/deploy (TestAdmission) and every release of
// test/matrix run them all.
var Table = []Group{
	{"own Node only", []Case{
		{"set its addresses (JSON patch with test)", Agent, Addresses("ExternalIP=192.0.2.10", "Hostname=$OWN", "InternalDNS=$OWN.internal"),
			Allowed.Then(addressesAre("192.0.2.10", "$OWN", "$OWN.internal"))},
		{"set its addresses (merge patch)", Agent, Patch(Own, "status",
			`{"status":{"addresses":[{"type":"ExternalIP","address":"192.0.2.10"},{"type":"Hostname","address":"$OWN"},{"type":"InternalDNS","address":"$OWN.internal"}]}}`), Allowed},
		{"write a nodeaddr.io/ annotation", Agent, Patch(Own, "", `{"metadata":{"annotations":{"nodeaddr.io/published":"192.0.2.10"}}}`), Allowed},
		{"remove a nodeaddr.io/ annotation", Agent, Patch(Own, "", `{"metadata":{"annotations":{"nodeaddr.io/published":null}}}`).After(As(Agent, Patch(Own, "", `{"metadata":{"annotations":{"nodeaddr.io/published":"192.0.2.10"}}}`))), Allowed},
		{"remove its uninitialized taint", Agent, Taints(Own, "remove the uninitialized taint", Without(harness.Uninitialized.Key)),
			Allowed.Then(taintsAre("example.com/dedicated,node.kubernetes.io/not-ready"))},
		{"set another Node's addresses", Agent, Patch(Other, "status", `{"status":{"addresses":[{"type":"ExternalIP","address":"192.0.2.99"}]}}`), Denied(OwnNode, "may not modify Node '$OTHER'")},
		{"annotate another Node", Agent, Patch(Other, "", `{"metadata":{"annotations":{"nodeaddr.io/published":"x"}}}`), Denied(OwnNode, "may not modify Node '$OTHER'")},
		{"remove another Node's uninitialized taint", Agent, Taints(Other, "remove the uninitialized taint", Without(harness.Uninitialized.Key)), Denied(OwnNode, "may not modify Node '$OTHER'")},
		{"add a label through nodes", Agent, Patch(Own, "", `{"metadata":{"labels":{"example.com/x":"1"}}}`), Denied(OwnNode, "labels (through nodes)")},
		{"add a label through nodes/status", Agent, Patch(Own, "status", `{"metadata":{"labels":{"example.com/x":"1"}}}`), Denied(OwnNode, "labels (through nodes/status)")},
		{"remove a label", Agent, Patch(Own, "", `{"metadata":{"labels":{"example.com/role":null}}}`), Denied(OwnNode, "labels (through nodes)")},
		{"remove another taint", Agent, Taints(Own, "remove example.com/dedicated", Without(Dedicated.Key)), Denied(OwnNode, "only remove the node.cloudprovider.kubernetes.io/uninitialized taint")},
		{"add a taint", Agent, Taints(Own, "add example.com/evil", Plus(corev1.Taint{Key: "example.com/evil", Effect: corev1.TaintEffectNoExecute})), Denied(OwnNode, "only remove the node.cloudprovider.kubernetes.io/uninitialized taint")},
		{"write a foreign annotation through nodes", Agent, Patch(Own, "", `{"metadata":{"annotations":{"example.com/x":"1"}}}`),
			Denied(OwnNode, "may change only annotations under nodeaddr.io/ and those its --annotations names (ConfigMap nodeaddr, rendered into this policy: '') (through nodes)")},
		{"write a foreign annotation through nodes/status", Agent, Patch(Own, "status", `{"metadata":{"annotations":{"example.com/x":"1"}}}`),
			Denied(OwnNode, "those its --annotations names (ConfigMap nodeaddr, rendered into this policy: '') (through nodes/status)")},
		{"change a foreign annotation", Agent, Patch(Own, "", `{"metadata":{"annotations":{"example.com/owner":"me"}}}`), Denied(OwnNode, "annotations under nodeaddr.io/")},
		{"cordon", Agent, Patch(Own, "", `{"spec":{"unschedulable":true}}`), Denied(OwnNode, "Node spec")},
		{"set the podCIDR", Agent, Patch(Own, "", `{"spec":{"podCIDR":"10.244.0.0/24","podCIDRs":["10.244.0.0/24"]}}`), Denied(OwnNode, "Node spec")},
		{"set a condition", Agent, Patch(Own, "status", `{"status":{"conditions":[{"type":"Ready","status":"True","reason":"Fake"}]}}`), Denied(OwnNode, "only status.addresses")},
		{"set the capacity", Agent, Patch(Own, "status", `{"status":{"capacity":{"pods":"500"}}}`), Denied(OwnNode, "only status.addresses")},
		{"write with a token bound to no pod", NoNode, Patch(Own, "", `{"metadata":{"annotations":{"nodeaddr.io/published":"x"}}}`), Denied(OwnNode, "carries no node name")},
		{"an administrator labels the agent's Node", Admin, Patch(Own, "", `{"metadata":{"labels":{"example.com/x":"1"}}}`), Allowed},
		{"an administrator cordons the agent's Node", Admin, Patch(Own, "", `{"spec":{"unschedulable":true}}`), Allowed},
		{"the kubelet writes a condition", Kubelet, Patch(Own, "status", `{"status":{"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady"}]}}`), Allowed},
	}},
	{"recreated Node", []Case{
		{"the old pod's token writes the recreated Node", Agent, AddAddresses("ExternalIP=192.0.2.10").After(RecreateOwn), Denied(OwnNode, "deleted and recreated")},
		{"the old pod's token writes an Event about the recreated Node", Agent, CreateEvent(nil).After(RecreateOwn), Denied(Events, "")},
		{"a new pod's token writes the recreated Node", AgentNewPod, AddAddresses("ExternalIP=192.0.2.10").After(RecreateOwn), Allowed},
	}},
	{"addresses", []Case{
		// What the agent may not write here, the kubelet may.
		{"add an IPv4 ExternalIP", Agent, AddAddresses("ExternalIP=192.0.2.10"), Allowed},
		{"add an IPv6 ExternalIP", Agent, AddAddresses("ExternalIP=2001:db8::10"), Allowed},
		{"a full IPv6 InternalIP", Agent, AddAddresses("InternalIP=fd00:1:2:3:4:5:6:7"), Allowed},
		{"replace the InternalIP", Agent, Addresses("Hostname=$OWN", "InternalDNS=$OWN.internal", "InternalIP=10.0.0.6"), Allowed},
		{"IPs before the other entries", Agent, Addresses("InternalIP=10.0.0.6", "Hostname=$OWN", "InternalDNS=$OWN.internal"), Allowed},
		{"an IPv6 address with an embedded IPv4", Agent, AddAddresses("ExternalIP=64:ff9b::192.0.2.1"), Allowed},
		{"change the Hostname", Agent, Addresses("Hostname=evil.example.com", "InternalDNS=$OWN.internal", "InternalIP=10.0.0.5"), Denied(OwnNode, "InternalIP").AllowedFor(Kubelet)},
		{"change the Hostname (merge patch)", Agent, Patch(Own, "status", `{"status":{"addresses":[{"type":"InternalIP","address":"192.0.2.10"},{"type":"Hostname","address":"evil.example"},{"type":"InternalDNS","address":"$OWN.internal"}]}}`), Denied(OwnNode, "InternalIP")},
		{"drop the InternalDNS", Agent, Addresses("Hostname=$OWN", "InternalIP=10.0.0.5"), Denied(OwnNode, "InternalIP").AllowedFor(Kubelet)},
		{"swap Hostname and InternalDNS", Agent, Addresses("InternalDNS=$OWN.internal", "Hostname=$OWN", "InternalIP=10.0.0.5"), Denied(OwnNode, "InternalIP").AllowedFor(Kubelet)},
		{"add an ExternalDNS", Agent, AddAddresses("ExternalDNS=evil.example.com"), Denied(OwnNode, "InternalIP").AllowedFor(Kubelet)},
		{"a name as ExternalIP", Agent, AddAddresses("ExternalIP=evil.example.com"), Denied(OwnNode, "InternalIP").AllowedFor(Kubelet)},
		{"a name as InternalIP (merge patch)", Agent, Patch(Own, "status", `{"status":{"addresses":[{"type":"InternalIP","address":"not-an-ip"},{"type":"Hostname","address":"$OWN"},{"type":"InternalDNS","address":"$OWN.internal"}]}}`), Denied(OwnNode, "InternalIP")},
		{"an IPv4 out of range", Agent, AddAddresses("ExternalIP=192.0.2.256"), Denied(OwnNode, "InternalIP").AllowedFor(Kubelet)},
		{"an IPv4 with a port", Agent, AddAddresses("ExternalIP=192.0.2.1:22"), Denied(OwnNode, "InternalIP").AllowedFor(Kubelet)},
		{"a CIDR", Agent, AddAddresses("InternalIP=192.0.2.0/24"), Denied(OwnNode, "InternalIP").AllowedFor(Kubelet)},
		{"an IPv6 with a zone", Agent, AddAddresses("ExternalIP=fe80::1%eth0"), Denied(OwnNode, "InternalIP").AllowedFor(Kubelet)},
		{"nine IPv6 groups", Agent, AddAddresses("ExternalIP=1::2:3:4:5:6:7:8"), Denied(OwnNode, "each an IPv4 or IPv6 address")},
		{"an IPv4-mapped loopback address", Agent, AddAddresses("InternalIP=::ffff:7f00:1"), Denied(OwnNode, "IPv4-mapped")},
		{"a link-local address", Agent, AddAddresses("InternalIP=169.254.169.254"), Denied(OwnNode, "link-local")},
		{"nine IPs", Agent, AddAddresses("ExternalIP=192.0.2.1", "ExternalIP=192.0.2.2", "ExternalIP=192.0.2.3", "ExternalIP=192.0.2.4",
			"ExternalIP=192.0.2.5", "ExternalIP=192.0.2.6", "ExternalIP=192.0.2.7", "ExternalIP=192.0.2.8"), Denied(OwnNode, "InternalIP").AllowedFor(Kubelet)},
	}},
	// Every named input as InternalIP and ExternalIP, every generated IPv6 shape as one of them: the
	// policy accepts exactly what AcceptableNodeIP (Go's netip) does.
	{"address syntax", syntaxCases()},
	{"annotations", []Case{
		{"4 nodeaddr.io/ annotations of 55 characters (a v4,v6 pair)", Agent, Patch(Own, "", annotations(4, 55)), Allowed},
		{"9 nodeaddr.io/ annotations", Agent, Patch(Own, "", annotations(9, 1)), Denied(OwnNode, "at most 8 nodeaddr.io/ annotations").AllowedFor(Admin)},
		{"a 129-character value", Agent, Patch(Own, "", annotations(1, 129)), Denied(OwnNode, "at most 128").AllowedFor(Admin)},
		{"a 200-character value", Agent, Patch(Own, "", annotations(1, 200)), Denied(OwnNode, "at most 128")},
	}},
	{"managedFields", []Case{
		// The kubelet owns the addresses and a condition, an administrator a label (server-side apply).
		{"take the addresses over from the kubelet", Agent, Patch(Own, "status", ownAddresses).After(kubeletOwnsStatus...), Allowed.Then(managersInclude("kubelet", "nodeaddr"))},
		{"send the managedFields unchanged", Agent, ManagedFields("unchanged", same).After(agentOwnsAddresses...), Allowed},
		{"reset managedFields", Agent, ManagedFields("none", none).After(agentOwnsAddresses...), Denied(OwnNode, "other managers")},
		{"drop the kubelet's entry", Agent, ManagedFields("without the kubelet's", without("kubelet")).After(agentOwnsAddresses...), Denied(OwnNode, "other managers")},
		{"drop the label's entry", Agent, ManagedFields("without kubectl-label's", without("kubectl-label")).After(agentOwnsAddresses...), Denied(OwnNode, "other managers")},
		{"add fields to the kubelet's entry", Agent, ManagedFields("the kubelet's extended", setFields("kubelet", `{"f:status":{"f:conditions":{".":{}},"f:addresses":{".":{}},"f:images":{}}}`)).After(agentOwnsAddresses...), Denied(OwnNode, "other managers")},
		{"rename another manager's entry", Agent, ManagedFields("kubectl-label's renamed", rename("kubectl-label", "someone-else")).After(agentOwnsAddresses...), Denied(OwnNode, "other managers")},
		{"write as the kubelet's field manager", Agent, Patch(Own, "status", `{"status":{"addresses":[{"type":"ExternalIP","address":"192.0.2.11"},{"type":"Hostname","address":"$OWN"},{"type":"InternalDNS","address":"$OWN.internal"}]}}`).Manager("kubelet").After(agentOwnsAddresses...), Denied(OwnNode, "other managers")},
		{"claim a label in its own entry", Agent, ManagedFields("a label in its own", setFields("nodeaddr", `{"f:metadata":{"f:labels":{"f:example.com/role":{}}}}`)).After(agentOwnsAddresses...), Denied(OwnNode, "own managedFields")},
		// ancient-changes: the server's merge of the oldest Update entries, which the agent may not add or extend.
		{"add an ancient-changes entry of 20000 fields", Agent, ManagedFields("an ancient-changes entry added", addAncient).After(agentOwnsAddresses...), Denied(OwnNode, "managedFields")},
		{"first write through nodes with ten Update managers (the server merges into ancient-changes)", Agent, Patch(Own, "", `{"metadata":{"annotations":{"nodeaddr.io/published":"192.0.2.10"}}}`).After(tenManagers...),
			Allowed.Then(managersInclude("ancient-changes")).Then(nodeAtMost(8192))},
		{"extend the server's ancient-changes entry", Agent, ManagedFields("ancient-changes extended", editFields(isManager("ancient-changes"), func(m map[string]any) { m["f:metadata"] = map[string]any{"f:labels": bulkFields("f:example.com/x-")} })).After(elevenManagers...), Denied(OwnNode, "managedFields")},
		{"add 20000 fields under another manager's annotation", Agent, ManagedFields("under manager-7's annotation", editFields(isManager("manager-7"), func(m map[string]any) {
			m["f:metadata"].(map[string]any)["f:annotations"].(map[string]any)["f:example.com/m7"] = bulkFields("f:example.com/x-")
		})).After(elevenManagers...), Denied(OwnNode, "managedFields")},
		{"add 20000 fields under its own annotation", Agent, ManagedFields("under its own annotation", editFields(func(e metav1.ManagedFieldsEntry) bool { return e.Manager == "nodeaddr" && e.Subresource == "" }, func(m map[string]any) {
			m["f:metadata"].(map[string]any)["f:annotations"].(map[string]any)["f:nodeaddr.io/published"] = map[string]any{"f:x": bulkFields("f:example.com/x-")}
		})).After(elevenManagers...), Denied(OwnNode, "managedFields")},
	}},
	{"Events", []Case{
		// RBAC grants core/v1 Events in default; the policy confines them. An administrator writes any.
		{"its Event about its own Node", Agent, CreateEvent(nil), Allowed},
		{"the recorder's aggregation of a repeat", Agent, PatchEvent("$OWN.nodeaddr", `{"count":2,"message":"Addresses changed again"}`).After(As(Agent, NamedEvent("$OWN.nodeaddr", Own, "nodeaddr"))), Allowed},
		{"the recorder's aggregation with lastTimestamp", Agent, PatchEvent("$OWN.nodeaddr", fmt.Sprintf(`{"count":2,"lastTimestamp":%q,"message":"Addresses changed again"}`, time.Now().UTC().Format(time.RFC3339))).After(As(Agent, NamedEvent("$OWN.nodeaddr", Own, "nodeaddr"))), Allowed},
		{"about another Node", Agent, CreateEvent(AboutOther), Denied(Events, "").AllowedFor(Admin)},
		{"about a Pod", Agent, CreateEvent(func(e *corev1.Event, _ *World) {
			e.InvolvedObject = corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "victim", APIVersion: "v1"}
		}), Denied(Events, "").AllowedFor(Admin)},
		{"posing as the kubelet", Agent, CreateEvent(func(e *corev1.Event, _ *World) { e.Source.Component = "kubelet" }), Denied(Events, "").AllowedFor(Admin)},
		{"posing as another host", Agent, CreateEvent(func(e *corev1.Event, w *World) { e.Source.Host = w.Other }), Denied(Events, "").AllowedFor(Admin)},
		{"reporting as the scheduler", Agent, CreateEvent(func(e *corev1.Event, _ *World) { e.ReportingController = "default-scheduler" }), Denied(Events, "").AllowedFor(Admin)},
		{"a message over 1 KiB", Agent, CreateEvent(func(e *corev1.Event, _ *World) { e.Message = strings.Repeat("x", 1025) }), Denied(Events, "").AllowedFor(Admin)},
		{"with annotations", Agent, CreateEvent(func(e *corev1.Event, _ *World) { e.Annotations = map[string]string{"x": "y"} }), Denied(Events, "").AllowedFor(Admin)},
		{"in kube-system", Agent, CreateEvent(func(e *corev1.Event, _ *World) {
			e.Namespace = "kube-system"
			e.InvolvedObject = corev1.ObjectReference{Kind: "Pod", Namespace: "kube-system", Name: "x", APIVersion: "v1"}
		}), DeniedByRBAC.AllowedFor(Admin)},
		{"patch its Event to a message over 1 KiB", Agent, PatchEvent("$OWN.nodeaddr", fmt.Sprintf(`{"message":%q}`, strings.Repeat("x", 1025))).After(As(Agent, NamedEvent("$OWN.nodeaddr", Own, "nodeaddr"))), Denied(Events, "")},
		{"an events.k8s.io Event", Agent, CreateEventV1(), DeniedByRBAC.AllowedFor(Admin)},
		// Only Events that already are its own: not the kubelet's, rewritten.
		{"rewrite the kubelet's Event about another Node into one about its own", Agent, PatchEvent("$OTHER.rebooted", `{"involvedObject":{"name":"$OWN","uid":"$OWN_UID"},"source":{"component":"nodeaddr","host":"$OWN"},"reason":"AddressesUpdated","type":"Normal","message":"nothing happened"}`).After(As(OtherKubelet, NamedEvent("$OTHER.rebooted", Other, "kubelet"))), Denied(Events, "already")},
		{"turn the kubelet's Event about its own Node into its own", Agent, PatchEvent("$OWN.rebooted", `{"source":{"component":"nodeaddr","host":"$OWN"},"message":"nothing happened"}`).After(As(Kubelet, NamedEvent("$OWN.rebooted", Own, "kubelet"))), Denied(Events, "already")},
		// Every free-text field bounded, on create and on patch, and the managedFields and finalizers sent with them.
		{"a 1 MiB type", Agent, CreateEvent(func(e *corev1.Event, _ *World) { e.Type = mib }), Denied(Events, "")},
		{"a type neither Normal nor Warning", Agent, CreateEvent(func(e *corev1.Event, _ *World) { e.Type = "Critical" }), Denied(Events, "")},
		{"a 1 MiB involvedObject.fieldPath", Agent, CreateEvent(func(e *corev1.Event, _ *World) { e.InvolvedObject.FieldPath = mib }), Denied(Events, "")},
		{"a 1 MiB involvedObject.resourceVersion", Agent, CreateEvent(func(e *corev1.Event, _ *World) { e.InvolvedObject.ResourceVersion = mib }), Denied(Events, "")},
		{"a 1 MiB reportingInstance", Agent, CreateEvent(func(e *corev1.Event, _ *World) { e.ReportingInstance = mib }), Denied(Events, "")},
		{"2000 finalizers", Agent, CreateEvent(func(e *corev1.Event, _ *World) {
			for i := range 2000 {
				e.Finalizers = append(e.Finalizers, fmt.Sprintf("example.com/f%d", i))
			}
		}), Denied(Events, "")},
		{"a managedFields entry of 20000 fields", Agent, CreateEvent(func(e *corev1.Event, _ *World) {
			e.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "nodeaddr", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
				Time: &metav1.Time{Time: time.Now()}, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: mustJSON(map[string]any{"f:metadata": map[string]any{"f:labels": bulkFields("f:x-")}})}}}
		}), Denied(Events, "")},
		{"patch its Event to a 1 MiB type", Agent, PatchEvent("$OWN.nodeaddr", fmt.Sprintf(`{"type":%q}`, mib)).After(As(Agent, NamedEvent("$OWN.nodeaddr", Own, "nodeaddr"))), Denied(Events, "")},
		{"patch its Event to a 1 MiB involvedObject.fieldPath", Agent, PatchEvent("$OWN.nodeaddr", fmt.Sprintf(`{"involvedObject":{"fieldPath":%q}}`, mib)).After(As(Agent, NamedEvent("$OWN.nodeaddr", Own, "nodeaddr"))), Denied(Events, "")},
	}},
}

// ownAddresses is the agent's write of its Node's addresses (an ExternalIP added).
const ownAddresses = `{"status":{"addresses":[{"type":"Hostname","address":"$OWN"},{"type":"InternalDNS","address":"$OWN.internal"},{"type":"InternalIP","address":"10.0.0.5"},{"type":"ExternalIP","address":"192.0.2.10"}]}}`

// kubeletOwnsStatus: an administrator's server-side apply of a label (which makes the API server
// track managedFields), then the kubelet's write of the addresses and a condition.
var kubeletOwnsStatus = []Step{
	Do("an administrator applies a label server-side", func(ctx context.Context, w *World) error {
		_, err := w.cp.Admin.CoreV1().Nodes().Patch(ctx, w.Own, types.ApplyPatchType,
			[]byte(fmt.Sprintf(`{"apiVersion":"v1","kind":"Node","metadata":{"name":%q,"labels":{"example.com/tier":"db"}}}`, w.Own)),
			metav1.PatchOptions{FieldManager: "kubectl-label"})
		return err
	}),
	As(Kubelet, Patch(Own, "status", `{"status":{"addresses":[{"type":"Hostname","address":"$OWN"},{"type":"InternalDNS","address":"$OWN.internal"},{"type":"InternalIP","address":"10.0.0.5"}],"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady"}]}}`)),
}

// agentOwnsAddresses: kubeletOwnsStatus, then the agent's addresses.
var agentOwnsAddresses = append(slices.Clone(kubeletOwnsStatus), As(Agent, Patch(Own, "status", ownAddresses)))

// tenManagers: agentOwnsAddresses, then eight more Update managers (ten in all): the agent's first
// write through nodes is the eleventh, and the server merges the two oldest into ancient-changes.
var tenManagers = func() []Step {
	s := slices.Clone(agentOwnsAddresses)
	for i := range 8 {
		s = append(s, As(Admin, Patch(Own, "", fmt.Sprintf(`{"metadata":{"annotations":{"example.com/m%d":"x"}}}`, i)).Manager(fmt.Sprintf("manager-%d", i))))
	}
	return s
}()

// elevenManagers: tenManagers and the agent's first write through nodes, after which the Node has
// an ancient-changes entry.
var elevenManagers = append(slices.Clone(tenManagers), As(Agent, Patch(Own, "", `{"metadata":{"annotations":{"nodeaddr.io/published":"192.0.2.10"}}}`)),
	Do("the server made an ancient-changes entry", func(_ context.Context, w *World) error {
		if msg := managersInclude("ancient-changes")(w); msg != "" {
			return fmt.Errorf("%s", msg)
		}
		return nil
	}))

// mib is a 1 MiB string, the size of an Event field a compromised agent would store if it could.
var mib = strings.Repeat("x", 1<<20)

// annotations is a merge patch of n nodeaddr.io/ annotations of values of valueLen characters.
func annotations(n, valueLen int) string {
	m := map[string]string{}
	for i := range n {
		m[fmt.Sprintf("nodeaddr.io/k%d", i)] = strings.Repeat("1", valueLen)
	}
	return string(mustJSON(map[string]any{"metadata": map[string]any{"annotations": m}}))
}

// bulkFields is 20000 managedFields keys prefix00000...
func bulkFields(prefix string) map[string]any {
	bulk := map[string]any{}
	for i := range 20000 {
		bulk[fmt.Sprintf("%s%05d", prefix, i)] = map[string]any{}
	}
	return bulk
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func isManager(m string) func(metav1.ManagedFieldsEntry) bool {
	return func(e metav1.ManagedFieldsEntry) bool { return e.Manager == m }
}

func none(*World, []metav1.ManagedFieldsEntry) []metav1.ManagedFieldsEntry {
	return []metav1.ManagedFieldsEntry{}
}

func same(_ *World, m []metav1.ManagedFieldsEntry) []metav1.ManagedFieldsEntry { return m }

func without(manager string) func(*World, []metav1.ManagedFieldsEntry) []metav1.ManagedFieldsEntry {
	return func(_ *World, m []metav1.ManagedFieldsEntry) []metav1.ManagedFieldsEntry {
		return slices.DeleteFunc(m, isManager(manager))
	}
}

func setFields(manager, fields string) func(*World, []metav1.ManagedFieldsEntry) []metav1.ManagedFieldsEntry {
	return func(_ *World, m []metav1.ManagedFieldsEntry) []metav1.ManagedFieldsEntry {
		for i := range m {
			if m[i].Manager == manager {
				m[i].FieldsV1 = &metav1.FieldsV1{Raw: []byte(fields)}
			}
		}
		return m
	}
}

func rename(from, to string) func(*World, []metav1.ManagedFieldsEntry) []metav1.ManagedFieldsEntry {
	return func(_ *World, m []metav1.ManagedFieldsEntry) []metav1.ManagedFieldsEntry {
		for i := range m {
			if m[i].Manager == from {
				m[i].Manager = to
			}
		}
		return m
	}
}

// addAncient appends an ancient-changes entry of 20000 label fields (such a patch, unchecked, grew
// a Node from 1.7 KB to 880 KB).
func addAncient(_ *World, m []metav1.ManagedFieldsEntry) []metav1.ManagedFieldsEntry {
	return append(m, metav1.ManagedFieldsEntry{Manager: "ancient-changes", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
		Time: &metav1.Time{Time: time.Now()}, FieldsType: "FieldsV1",
		FieldsV1: &metav1.FieldsV1{Raw: mustJSON(map[string]any{"f:metadata": map[string]any{"f:labels": bulkFields("f:example.com/x-")}})}})
}

// editFields edits the fields of the first entry pick selects.
func editFields(pick func(metav1.ManagedFieldsEntry) bool, edit func(map[string]any)) func(*World, []metav1.ManagedFieldsEntry) []metav1.ManagedFieldsEntry {
	return func(w *World, m []metav1.ManagedFieldsEntry) []metav1.ManagedFieldsEntry {
		i := slices.IndexFunc(m, pick)
		if i < 0 {
			w.t.Fatalf("no such managedFields entry in %+v", m)
		}
		var f map[string]any
		if err := json.Unmarshal(m[i].FieldsV1.Raw, &f); err != nil {
			w.t.Fatal(err)
		}
		edit(f)
		m[i].FieldsV1 = &metav1.FieldsV1{Raw: mustJSON(f)}
		return m
	}
}

func managersInclude(managers ...string) func(w *World) string {
	return func(w *World) string {
		mf := w.Node(Own).ManagedFields
		for _, m := range managers {
			if !slices.ContainsFunc(mf, isManager(m)) {
				return fmt.Sprintf("managedFields lack %s's entry: %+v", m, mf)
			}
		}
		return ""
	}
}

func nodeAtMost(bytes int) func(w *World) string {
	return func(w *World) string {
		if n := len(mustJSON(w.Node(Own))); n > bytes {
			return fmt.Sprintf("the Node is %d bytes after the agent's own writes, want at most %d", n, bytes)
		}
		return ""
	}
}

func taintsAre(keys string) func(w *World) string {
	return func(w *World) string {
		if got := strings.Join(harness.TaintKeys(w.Node(Own)), ","); got != keys {
			return fmt.Sprintf("taints %s, want %s", got, keys)
		}
		return ""
	}
}

func addressesAre(addrs ...string) func(w *World) string {
	return func(w *World) string {
		var got, want []string
		for _, a := range w.Node(Own).Status.Addresses {
			got = append(got, a.Address)
		}
		for _, a := range addrs {
			want = append(want, w.expand(a))
		}
		if !slices.Equal(got, want) {
			return fmt.Sprintf("addresses %v, want %v", got, want)
		}
		return ""
	}
}
