package publisher

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	cloudproviderapi "k8s.io/cloud-provider/api"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeaddr/nodeaddr/internal/vocab"
	"github.com/nodeaddr/nodeaddr/resolver"
)

func annotated(n *corev1.Node, v string) *corev1.Node {
	n.Annotations = map[string]string{cloudproviderapi.AnnotationAlphaProvidedIPAddr: v, "example.com/other": "x"}
	return n
}

// internalState is the resolver's state for InternalIP ips, with what the provided-node-ip stage
// said: the annotated IPs and those of them missing from the host.
func internalState(nodeIP resolver.NodeIPOutcome, ips ...string) resolver.State {
	s := resolver.State{Managed: manageInternal, NodeIP: nodeIP}
	for _, ip := range ips {
		s.Addresses = append(s.Addresses, want(resolver.InternalIP, ip))
	}
	return s
}

func ips(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, ip := range s {
		out = append(out, netip.MustParseAddr(ip))
	}
	return out
}

// The kubelet's node IP is on the host: the resolver made it the InternalIP, and the taint goes.
func TestReconcileProvidedNodeIPOnHost(t *testing.T) {
	old := []corev1.NodeAddress{internal("10.0.0.5"), hostname(nodeName)}
	f := newFixture(t, annotated(testNode("10", old, uninitTaint), "10.0.0.5"),
		func(c *Config) { c.Managed = manageInternal })
	f.start(t, internalState(resolver.NodeIPOutcome{Provided: ips("10.0.0.5")}, "10.0.0.5"))
	if err := f.p.reconcile(t.Context()); err != nil {
		t.Fatal(err)
	}
	// The addresses already were right: only the taint is written.
	assertEqual(t, "patches", f.patches(), []string{taintPatchAction([]corev1.Taint{uninitTaint}, []corev1.Taint{})})
	assertEqual(t, "events", f.events(), []string{taintRemovedEvent})
	if got := f.obs.nodeIPMissing(); got != 0 {
		t.Errorf("nodeaddr_provided_node_ip_missing = %v, want 0", got)
	}
}

// The kubelet's node IP is not on the host: the resolved addresses are written, the taint stays,
// and one Warning says why, however often the publisher reconciles.
func TestReconcileProvidedNodeIPMissing(t *testing.T) {
	old := []corev1.NodeAddress{hostname(nodeName)}
	f := newFixture(t, annotated(testNode("10", old, uninitTaint), "10.0.0.99"),
		func(c *Config) { c.Managed = manageInternal })
	missing := resolver.NodeIPOutcome{Provided: ips("10.0.0.99"), Missing: ips("10.0.0.99")}
	f.start(t, internalState(missing, "192.0.2.10"))
	for range 3 {
		if err := f.p.reconcile(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	assertEqual(t, "patches", f.patches(), []string{
		addressesPatchAction(old, []corev1.NodeAddress{internal("192.0.2.10"), hostname(nodeName)})})
	ev := f.events()
	if len(ev) != 2 || !strings.HasPrefix(ev[1], "Warning "+vocab.ReasonProvidedNodeIPNotFound+" The kubelet's node IP [10.0.0.99]") {
		t.Fatalf("events %q, want AddressesUpdated then one ProvidedNodeIPNotFound warning", ev)
	}
	if n := f.get(t); !hasUninitialized(n) || n.Annotations["example.com/other"] != "x" {
		t.Fatalf("node %+v: want the taint and the other annotation kept", n)
	}
	if got := f.obs.nodeIPMissing(); got != 1 {
		t.Errorf("nodeaddr_provided_node_ip_missing = %v, want 1", got)
	}

	// The address appears on the host: the resolver makes it the InternalIP, and the taint goes.
	f.observe(f.get(t))
	f.p.Publish(internalState(resolver.NodeIPOutcome{Provided: ips("10.0.0.99")}, "10.0.0.99"), time.Time{})
	if err := f.p.reconcile(t.Context()); err != nil {
		t.Fatal(err)
	}
	n := f.get(t)
	if hasUninitialized(n) || format(n.Status.Addresses) != "[InternalIP=10.0.0.99 Hostname=node-a]" {
		t.Fatalf("after the IP appeared: addresses %v, taints %v", n.Status.Addresses, n.Spec.Taints)
	}
}

// An annotation the resolver could not parse: one ProvidedNodeIPInvalid Warning, and the resolved
// addresses are written and the taint goes.
func TestReconcileProvidedNodeIPInvalid(t *testing.T) {
	old := []corev1.NodeAddress{hostname(nodeName)}
	f := newFixture(t, annotated(testNode("10", old, uninitTaint), "node-a"),
		func(c *Config) { c.Managed = manageInternal })
	invalid := resolver.NodeIPOutcome{Err: errors.New(`annotation alpha.kubernetes.io/provided-node-ip="node-a": could not parse "node-a"`)}
	f.start(t, internalState(invalid, "192.0.2.10"))
	for range 2 {
		if err := f.p.reconcile(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	ev := f.events()
	if len(ev) != 3 || !strings.HasPrefix(ev[1], "Warning "+vocab.ReasonProvidedNodeIPInvalid+" Ignoring annotation") || ev[2] != taintRemovedEvent {
		t.Fatalf("events %q, want AddressesUpdated, one ProvidedNodeIPInvalid warning, TaintRemoved", ev)
	}
	if got := f.obs.nodeIPMissing(); got != 0 {
		t.Errorf("nodeaddr_provided_node_ip_missing = %v, want 0", got)
	}
}

func format(a []corev1.NodeAddress) string {
	s := make([]string, len(a))
	for i, x := range a {
		s[i] = string(x.Type) + "=" + x.Address
	}
	return "[" + strings.Join(s, " ") + "]"
}
