package publisher

import (
	"errors"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nodeaddr/nodeaddr/internal/vocab"
	"github.com/nodeaddr/nodeaddr/resolver"
)

func addr(t resolver.AddressType, cidr string) resolver.Address {
	p := netip.MustParsePrefix(cidr)
	return resolver.Address{Type: t, IP: p.Addr(), PrefixLen: p.Bits()}
}

func TestAnnotationValue(t *testing.T) {
	addrs := []resolver.Address{
		addr(resolver.InternalIP, "fd00::5/64"), addr(resolver.InternalIP, "10.0.0.5/24"),
		addr(resolver.ExternalIP, "203.0.113.7/32"), {Type: resolver.ExternalIP, IP: netip.MustParseAddr("2001:db8::7")},
	}
	tests := []struct {
		format, want string
	}{
		{"internal-ipv4", "10.0.0.5"},
		{"internal-ipv6", "fd00::5"},
		{"internal-ips", "fd00::5,10.0.0.5"}, // the status order: IPv6 primary here
		{"internal-ipv4-cidr", "10.0.0.5/24"},
		{"internal-ipv6-cidr", "fd00::5/64"},
		{"external-ipv4-cidr", "203.0.113.7/32"},
		{"external-ipv6-cidr", "2001:db8::7/128"}, // prefix unknown: a host prefix
	}
	spec := func(format string) vocab.AnnotationSpec {
		specs, err := vocab.ParseAnnotations("k="+format, manageBoth)
		if err != nil {
			t.Fatal(err)
		}
		return specs[0]
	}
	for _, tt := range tests {
		if got := annotationValue(spec(tt.format), addrs); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.format, got, tt.want)
		}
	}
	if got := annotationValue(spec("external-ipv6"), addrs[:3]); got != "" {
		t.Errorf("no IPv6 ExternalIP: %q, want empty", got)
	}
}

func TestAnnotationChanges(t *testing.T) {
	specs, err := vocab.ParseAnnotations("nodeaddr", manageExternal)
	if err != nil {
		t.Fatal(err)
	}
	v4 := []resolver.Address{addr(resolver.ExternalIP, "192.0.2.10/24")}
	tests := []struct {
		name    string
		current map[string]string
		addrs   []resolver.Address
		want    map[string]string
	}{
		{name: "fresh", current: nil, addrs: v4, want: map[string]string{"nodeaddr.io/external-ipv4": "192.0.2.10"}},
		{name: "up to date", current: map[string]string{"nodeaddr.io/external-ipv4": "192.0.2.10", "other": "x"}, addrs: v4},
		{name: "changed, and a stale IPv6 removed", current: map[string]string{"nodeaddr.io/external-ipv4": "192.0.2.9", "nodeaddr.io/external-ipv6": "2001:db8::9"},
			addrs: v4, want: map[string]string{"nodeaddr.io/external-ipv4": "192.0.2.10", "nodeaddr.io/external-ipv6": ""}},
		{name: "an empty value is removed", current: map[string]string{"nodeaddr.io/external-ipv4": "192.0.2.10", "nodeaddr.io/external-ipv6": ""},
			addrs: v4, want: map[string]string{"nodeaddr.io/external-ipv6": ""}},
		{name: "nothing resolved, nothing there", current: map[string]string{"other": "x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := annotationChanges(tt.current, specs, tt.addrs); !maps.Equal(got, tt.want) {
				t.Errorf("changes %v, want %v", got, tt.want)
			}
		})
	}
}

func TestAnnotationsPatch(t *testing.T) {
	n := testNode("7", nil)
	n.Annotations = map[string]string{"a/b~c": "old", "keep": "x"}
	pt, data, err := annotationsPatch(n, map[string]string{"a/b~c": "", "new.io/ip": "192.0.2.1"})
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"op":"test","path":"/metadata/annotations/a~1b~0c","value":"old"},{"op":"remove","path":"/metadata/annotations/a~1b~0c","value":null},` +
		`{"op":"test","path":"/metadata/annotations/new.io~1ip","value":null},{"op":"add","path":"/metadata/annotations/new.io~1ip","value":"192.0.2.1"}]`
	if pt != "application/json-patch+json" || string(data) != want {
		t.Errorf("patch %s %s\nwant %s", pt, data, want)
	}
	n.Annotations = nil
	pt, data, _ = annotationsPatch(n, map[string]string{"new.io/ip": "192.0.2.1", "gone": ""})
	if pt != "application/merge-patch+json" || string(data) != `{"metadata":{"annotations":{"new.io/ip":"192.0.2.1"},"resourceVersion":"7"}}` {
		t.Errorf("patch without annotations: %s %s", pt, data)
	}
}

// The publisher writes the annotations with the addresses, in the same write (so no consumer sees
// the addresses without them), and before the taint; alone when only they change (a new
// --annotations, a prefix length), once per change, leaving every other annotation alone; the `test` of an absent key holds on the fake's JSON patch
// (the API server's library), and a concurrent change of one of our keys is a conflict.
func TestReconcileWritesAnnotations(t *testing.T) {
	node := testNode("10", kubeletAddrs(), uninitTaint)
	node.Annotations = map[string]string{"other.io/x": "1", "nodeaddr.io/external-ipv6": "2001:db8::1"}
	specs, _ := vocab.ParseAnnotations("nodeaddr,k3s", manageExternal)
	f := newFixture(t, node, func(c *Config) { c.Annotations = specs })
	st := externalState()
	st.Addresses = []resolver.Address{addr(resolver.ExternalIP, "203.0.113.7/24")}
	f.start(t, st)
	if err := f.p.reconcile(t.Context()); err != nil {
		t.Fatal(err)
	}
	assertEqual(t, "writes", f.obs.Writes(), counted([]string{"addresses/success", "taint/success"}))
	if p := f.patches()[0]; !strings.HasPrefix(p, "nodes/status ") || !strings.Contains(p, `"path":"/status/addresses"`) ||
		!strings.Contains(p, `"path":"/metadata/annotations/k3s.io~1external-ip"`) {
		t.Errorf("the first write is %s, want the addresses and annotations through nodes/status", p)
	}
	got := f.get(t).Annotations
	want := map[string]string{"other.io/x": "1", "nodeaddr.io/external-ipv4": "203.0.113.7", "k3s.io/external-ip": "203.0.113.7"}
	if !maps.Equal(got, want) {
		t.Errorf("annotations %v, want %v", got, want)
	}
	ev := f.events()
	if !slices.Contains(ev, `Normal AnnotationsUpdated Annotations set: nodeaddr.io/external-ipv4="203.0.113.7" nodeaddr.io/external-ipv6="" k3s.io/external-ip="203.0.113.7"`) {
		t.Errorf("events %v", ev)
	}

	// Nothing changed: nothing written.
	f.observe(f.get(t))
	if err := f.p.reconcile(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := len(f.patches()); n != 2 {
		t.Errorf("%d patches after a no-op reconcile, want 2", n)
	}

	// Someone sets one of our keys after our last read: the `test` fails (a conflict), the Node is
	// re-read and the next pass writes over it; the other keys are untouched.
	f.p.cfg.Annotations, _ = vocab.ParseAnnotations("nodeaddr,example.com/cidr=external-ipv4-cidr", manageExternal)
	f.observe(f.get(t))
	if err := f.p.reconcile(t.Context()); err != nil {
		t.Fatal(err)
	}
	stale := f.get(t).DeepCopy()
	f.observe(stale)
	theirs := stale.DeepCopy()
	theirs.Annotations["example.com/cidr"] = "198.51.100.1/8"
	theirs.ResourceVersion = nextRV(stale.ResourceVersion)
	if err := f.client.Tracker().Update(nodesGVR, theirs, ""); err != nil {
		t.Fatal(err)
	}
	st.Addresses = []resolver.Address{addr(resolver.ExternalIP, "203.0.113.7/25")} // only the prefix changes
	f.p.Publish(st, time.Now())
	if err := f.p.reconcile(t.Context()); !errors.Is(err, errConflict) {
		t.Fatalf("reconcile over a concurrent change: %v, want a conflict", err)
	}
	if err := f.p.reconcile(t.Context()); err != nil {
		t.Fatal(err)
	}
	got = f.get(t).Annotations
	want = map[string]string{"other.io/x": "1", "nodeaddr.io/external-ipv4": "203.0.113.7",
		"k3s.io/external-ip": "203.0.113.7", "example.com/cidr": "203.0.113.7/25"}
	if !maps.Equal(got, want) {
		t.Errorf("annotations %v, want %v", got, want)
	}
	assertEqual(t, "writes", f.obs.Writes(), counted([]string{"addresses/success", "taint/success",
		"annotations/success", "annotations/conflict", "annotations/success"}))
}

// The approval record lists every managed type's IPs, in status order.
func TestRecordSpecValue(t *testing.T) {
	addrs := []resolver.Address{
		{Type: resolver.InternalIP, IP: netip.MustParseAddr("192.0.2.10")},
		{Type: resolver.InternalIP, IP: netip.MustParseAddr("2001:db8::10")},
		{Type: resolver.ExternalIP, IP: netip.MustParseAddr("203.0.113.7")},
	}
	if got := annotationValue(vocab.RecordSpec(), addrs); got != "192.0.2.10,2001:db8::10,203.0.113.7" {
		t.Fatalf("record %q", got)
	}
}
