package publisher

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	cloudproviderapi "k8s.io/cloud-provider/api"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeaddr/nodeaddr/resolver"
)

func TestApplyProvidedNodeIP(t *testing.T) {
	local := func(ips ...string) []netip.Prefix {
		out := []netip.Prefix{}
		for _, s := range ips {
			ip := netip.MustParseAddr(s)
			out = append(out, netip.PrefixFrom(ip, ip.BitLen()))
		}
		return out
	}
	both := resolver.State{Managed: manageBoth, Addresses: []resolver.Address{
		want(resolver.InternalIP, "192.0.2.10"), want(resolver.InternalIP, "2001:db8::10"), want(resolver.ExternalIP, "203.0.113.7")},
		Local: local("192.0.2.10", "2001:db8::10", "203.0.113.7", "10.0.0.5", "fd00::5")}
	tests := []struct {
		name       string
		annotation string
		state      resolver.State
		want       []string // type=ip
		missing    string
		err        string
	}{
		{name: "no annotation", state: both,
			want: []string{"InternalIP=192.0.2.10", "InternalIP=2001:db8::10", "ExternalIP=203.0.113.7"}},
		{name: "one IP on the host replaces the InternalIPs", annotation: "10.0.0.5", state: both,
			want: []string{"InternalIP=10.0.0.5", "ExternalIP=203.0.113.7"}},
		{name: "the resolved address itself", annotation: "192.0.2.10", state: both,
			want: []string{"InternalIP=192.0.2.10", "ExternalIP=203.0.113.7"}},
		{name: "dual-stack pair, annotation order", annotation: "fd00::5,10.0.0.5", state: both,
			want: []string{"InternalIP=fd00::5", "InternalIP=10.0.0.5", "ExternalIP=203.0.113.7"}},
		{name: "not on the host: resolved addresses kept, missing reported", annotation: "10.0.0.99", state: both,
			want:    []string{"InternalIP=192.0.2.10", "InternalIP=2001:db8::10", "ExternalIP=203.0.113.7"},
			missing: "[10.0.0.99]"},
		{name: "half of a pair missing", annotation: "10.0.0.5,fd00::99", state: both,
			want:    []string{"InternalIP=192.0.2.10", "InternalIP=2001:db8::10", "ExternalIP=203.0.113.7"},
			missing: "[fd00::99]"},
		{name: "InternalIP not managed: ignored", annotation: "10.0.0.99", state: externalState("203.0.113.7"),
			want: []string{"ExternalIP=203.0.113.7"}},
		{name: "two IPv4: invalid, ignored", annotation: "10.0.0.5,10.0.0.6", state: both,
			want: []string{"InternalIP=192.0.2.10", "InternalIP=2001:db8::10", "ExternalIP=203.0.113.7"},
			err:  "must contain either a single IP or a dual-stack pair"},
		{name: "garbage: invalid, ignored", annotation: "node-a", state: both,
			want: []string{"InternalIP=192.0.2.10", "InternalIP=2001:db8::10", "ExternalIP=203.0.113.7"},
			err:  `could not parse "node-a"`},
		{name: "host addresses unknown: trusted", annotation: "10.0.0.99",
			state: resolver.State{Managed: manageInternal, Addresses: []resolver.Address{want(resolver.InternalIP, "192.0.2.10")}},
			want:  []string{"InternalIP=10.0.0.99"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := applyProvidedNodeIP(tt.annotation, tt.state)
			var got []string
			for _, a := range r.Addresses {
				got = append(got, a.String())
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("addresses %v, want %v", got, tt.want)
			}
			if m := r.Missing; (tt.missing == "") != (len(m) == 0) || len(m) > 0 && tt.missing != fmtIPs(m) {
				t.Errorf("missing %v, want %s", m, tt.missing)
			}
			if (r.Err == nil) != (tt.err == "") || r.Err != nil && !strings.Contains(r.Err.Error(), tt.err) {
				t.Errorf("err %v, want %q", r.Err, tt.err)
			}
		})
	}
}

func fmtIPs(ips []netip.Addr) string {
	s := make([]string, len(ips))
	for i, ip := range ips {
		s[i] = ip.String()
	}
	return "[" + strings.Join(s, " ") + "]"
}

func annotated(n *corev1.Node, v string) *corev1.Node {
	n.Annotations = map[string]string{cloudproviderapi.AnnotationAlphaProvidedIPAddr: v, "example.com/other": "x"}
	return n
}

func internalState(local []string, ips ...string) resolver.State {
	s := resolver.State{Managed: manageInternal, Local: []netip.Prefix{}}
	for _, ip := range ips {
		s.Addresses = append(s.Addresses, want(resolver.InternalIP, ip))
	}
	for _, ip := range local {
		a := netip.MustParseAddr(ip)
		s.Local = append(s.Local, netip.PrefixFrom(a, a.BitLen()))
	}
	return s
}

// The kubelet's node IP is on the host: it becomes the InternalIP and the taint goes.
func TestReconcileProvidedNodeIPOnHost(t *testing.T) {
	old := []corev1.NodeAddress{internal("10.0.0.5"), hostname(nodeName)}
	f := newFixture(t, annotated(testNode("10", old, uninitTaint), "10.0.0.5"),
		func(c *Config) { c.Managed = manageInternal })
	f.start(t, internalState([]string{"10.0.0.5", "192.0.2.10"}, "192.0.2.10"))
	if err := f.p.reconcile(t.Context()); err != nil {
		t.Fatal(err)
	}
	// The addresses already were right: only the taint is written.
	assertEqual(t, "patches", f.patches(), []string{taintPatchAction([]corev1.Taint{uninitTaint}, []corev1.Taint{})})
	assertEqual(t, "events", f.events(), []string{taintRemovedEvent})
	assertEqual(t, "provided node IP missing", f.obs.nodeIP, []bool{false})
}

// The kubelet's node IP is not on the host: the resolved addresses are written, the taint stays,
// and one Warning says why, however often the publisher reconciles.
func TestReconcileProvidedNodeIPMissing(t *testing.T) {
	old := []corev1.NodeAddress{hostname(nodeName)}
	f := newFixture(t, annotated(testNode("10", old, uninitTaint), "10.0.0.99"),
		func(c *Config) { c.Managed = manageInternal })
	f.start(t, internalState([]string{"192.0.2.10"}, "192.0.2.10"))
	for range 3 {
		if err := f.p.reconcile(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	assertEqual(t, "patches", f.patches(), []string{
		addressesPatchAction(old, []corev1.NodeAddress{internal("192.0.2.10"), hostname(nodeName)})})
	ev := f.events()
	if len(ev) != 2 || !strings.HasPrefix(ev[1], "Warning "+ReasonProvidedNodeIPNotFound+" The kubelet's node IP [10.0.0.99]") {
		t.Fatalf("events %q, want AddressesUpdated then one ProvidedNodeIPNotFound warning", ev)
	}
	if n := f.get(t); !hasUninitialized(n) || n.Annotations["example.com/other"] != "x" {
		t.Fatalf("node %+v: want the taint and the other annotation kept", n)
	}
	assertEqual(t, "provided node IP missing", f.obs.nodeIP, []bool{true, true, true})

	// The address appears on the host: it becomes the InternalIP and the taint goes.
	f.observe(f.get(t))
	f.p.Publish(internalState([]string{"192.0.2.10", "10.0.0.99"}, "192.0.2.10"), time.Time{})
	if err := f.p.reconcile(t.Context()); err != nil {
		t.Fatal(err)
	}
	n := f.get(t)
	if hasUninitialized(n) || format(n.Status.Addresses) != "[InternalIP=10.0.0.99 Hostname=node-a]" {
		t.Fatalf("after the IP appeared: addresses %v, taints %v", n.Status.Addresses, n.Spec.Taints)
	}
}

// What the resolver takes from the Node: its pod CIDRs and its addresses of the managed types.
func TestResolverInput(t *testing.T) {
	node := testNode("10", []corev1.NodeAddress{{Type: corev1.NodeExternalIP, Address: "203.0.113.9"},
		{Type: corev1.NodeInternalIP, Address: "10.0.0.5"}, {Type: corev1.NodeHostName, Address: nodeName}})
	node.Spec.PodCIDRs = []string{"10.244.1.0/24", "fd00:10:244:1::/64"}
	v := ResolverInput(node, manageExternal)
	want := []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24"), netip.MustParsePrefix("fd00:10:244:1::/64")}
	if !slices.Equal(v.PodCIDRs, want) {
		t.Errorf("pod CIDRs %v, want %v", v.PodCIDRs, want)
	}
	if got := fmt.Sprint(v.Addresses); got != "[ExternalIP=203.0.113.9]" {
		t.Errorf("addresses %s, want the managed type only", got)
	}
	n := testNode("12", nil)
	n.Spec.PodCIDR = "10.244.2.0/24"
	if got := ResolverInput(n, manageExternal).PodCIDRs; !slices.Equal(got, []netip.Prefix{netip.MustParsePrefix("10.244.2.0/24")}) {
		t.Errorf("pod CIDRs from spec.podCIDR: %v", got)
	}
}

func format(a []corev1.NodeAddress) string {
	s := make([]string, len(a))
	for i, x := range a {
		s[i] = string(x.Type) + "=" + x.Address
	}
	return "[" + strings.Join(s, " ") + "]"
}
