package publisher

import (
	"net/netip"
	"slices"
	"testing"

	cloudproviderapi "k8s.io/cloud-provider/api"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeaddr/nodeaddr/resolver"
)

// Short constructors keep the tables readable.

func internal(ip string) corev1.NodeAddress {
	return corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip}
}

func external(ip string) corev1.NodeAddress {
	return corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: ip}
}

func hostname(name string) corev1.NodeAddress {
	return corev1.NodeAddress{Type: corev1.NodeHostName, Address: name}
}

func internalDNS(name string) corev1.NodeAddress {
	return corev1.NodeAddress{Type: corev1.NodeInternalDNS, Address: name}
}

func externalDNS(name string) corev1.NodeAddress {
	return corev1.NodeAddress{Type: corev1.NodeExternalDNS, Address: name}
}

func want(t resolver.AddressType, ip string) resolver.Address {
	return resolver.Address{Type: t, IP: netip.MustParseAddr(ip), Interface: "eth0"}
}

var (
	manageInternal = []resolver.AddressType{resolver.InternalIP}
	manageExternal = []resolver.AddressType{resolver.ExternalIP}
	manageBoth     = []resolver.AddressType{resolver.InternalIP, resolver.ExternalIP}
)

func TestMerge(t *testing.T) {
	for _, tc := range []struct {
		name    string
		current []corev1.NodeAddress
		managed []resolver.AddressType
		desired []resolver.Address
		want    []corev1.NodeAddress
	}{
		{
			name:    "empty node, nothing desired",
			managed: manageBoth,
			want:    []corev1.NodeAddress{},
		},
		{
			name:    "empty node gets InternalIP then ExternalIP",
			managed: manageBoth,
			desired: []resolver.Address{want(resolver.ExternalIP, "203.0.113.7"), want(resolver.InternalIP, "10.0.0.7")},
			want:    []corev1.NodeAddress{internal("10.0.0.7"), external("203.0.113.7")},
		},
		{
			name:    "Hostname only: ExternalIP goes to the front when there is no InternalIP",
			current: []corev1.NodeAddress{hostname("node-a")},
			managed: manageExternal,
			desired: []resolver.Address{want(resolver.ExternalIP, "203.0.113.7")},
			want:    []corev1.NodeAddress{external("203.0.113.7"), hostname("node-a")},
		},
		{
			name:    "Hostname only: InternalIP goes to the front, ExternalIP right after it",
			current: []corev1.NodeAddress{hostname("node-a")},
			managed: manageBoth,
			desired: []resolver.Address{want(resolver.InternalIP, "10.0.0.7"), want(resolver.ExternalIP, "203.0.113.7")},
			want:    []corev1.NodeAddress{internal("10.0.0.7"), external("203.0.113.7"), hostname("node-a")},
		},
		{
			name:    "kubelet dual-stack InternalIPs and Hostname kept, ExternalIP after the last InternalIP",
			current: []corev1.NodeAddress{internal("10.0.0.1"), internal("fd00::1"), hostname("node-a")},
			managed: manageExternal,
			desired: []resolver.Address{want(resolver.ExternalIP, "2001:db8::7"), want(resolver.ExternalIP, "203.0.113.7")},
			want: []corev1.NodeAddress{
				internal("10.0.0.1"), internal("fd00::1"),
				external("203.0.113.7"), external("2001:db8::7"),
				hostname("node-a"),
			},
		},
		{
			name:    "InternalIP replaced where the first old InternalIP stood",
			current: []corev1.NodeAddress{hostname("node-a"), internal("10.0.0.1"), externalDNS("a.example.com"), internal("fd00::1")},
			managed: manageInternal,
			desired: []resolver.Address{want(resolver.InternalIP, "10.0.0.2"), want(resolver.InternalIP, "fd00::2")},
			want: []corev1.NodeAddress{
				hostname("node-a"), internal("10.0.0.2"), internal("fd00::2"), externalDNS("a.example.com"),
			},
		},
		{
			name:    "IPv6-primary node: IPv6 first in every managed type",
			current: []corev1.NodeAddress{internal("fd00::1"), internal("10.0.0.1"), hostname("node-a")},
			managed: manageBoth,
			desired: []resolver.Address{
				want(resolver.InternalIP, "10.0.0.9"), want(resolver.InternalIP, "fd00::9"),
				want(resolver.ExternalIP, "198.51.100.9"), want(resolver.ExternalIP, "2001:db8::9"),
			},
			want: []corev1.NodeAddress{
				internal("fd00::9"), internal("10.0.0.9"),
				external("2001:db8::9"), external("198.51.100.9"),
				hostname("node-a"),
			},
		},
		{
			name:    "IPv4-primary node: IPv4 first whatever the desired order",
			current: []corev1.NodeAddress{internal("10.0.0.1"), internal("fd00::1")},
			managed: manageInternal,
			desired: []resolver.Address{want(resolver.InternalIP, "fd00::9"), want(resolver.InternalIP, "10.0.0.9")},
			want:    []corev1.NodeAddress{internal("10.0.0.9"), internal("fd00::9")},
		},
		{
			name:    "InternalIP family changes: ExternalIP ordered by the new primary",
			current: []corev1.NodeAddress{internal("10.0.0.1")},
			managed: manageBoth,
			desired: []resolver.Address{
				want(resolver.InternalIP, "fd00::9"),
				want(resolver.ExternalIP, "198.51.100.9"), want(resolver.ExternalIP, "2001:db8::9"),
			},
			want: []corev1.NodeAddress{internal("fd00::9"), external("2001:db8::9"), external("198.51.100.9")},
		},
		{
			name: "foreign entries keep their relative order",
			current: []corev1.NodeAddress{
				internalDNS("a.internal"), external("192.0.2.1"), hostname("node-a"), externalDNS("a.example.com"),
				internal("10.0.0.1"), external("192.0.2.2"), internalDNS("b.internal"),
			},
			managed: manageExternal,
			desired: []resolver.Address{want(resolver.ExternalIP, "203.0.113.7")},
			want: []corev1.NodeAddress{
				internalDNS("a.internal"), external("203.0.113.7"), hostname("node-a"), externalDNS("a.example.com"),
				internal("10.0.0.1"), internalDNS("b.internal"),
			},
		},
		{
			name:    "duplicate (type, address) pairs dropped, first kept",
			current: []corev1.NodeAddress{internal("10.0.0.1"), internal("10.0.0.1"), hostname("node-a"), internalDNS("a.internal"), hostname("node-a")},
			managed: manageExternal,
			desired: []resolver.Address{want(resolver.ExternalIP, "203.0.113.7"), want(resolver.ExternalIP, "203.0.113.7")},
			want:    []corev1.NodeAddress{internal("10.0.0.1"), external("203.0.113.7"), hostname("node-a"), internalDNS("a.internal")},
		},
		{
			name:    "same address under two types is not a duplicate",
			current: []corev1.NodeAddress{internal("10.0.0.1")},
			managed: manageExternal,
			desired: []resolver.Address{want(resolver.ExternalIP, "10.0.0.1")},
			want:    []corev1.NodeAddress{internal("10.0.0.1"), external("10.0.0.1")},
		},
		{
			name:    "managed type with nothing desired loses its old entries",
			current: []corev1.NodeAddress{internal("10.0.0.1"), external("203.0.113.1"), external("2001:db8::1"), hostname("node-a")},
			managed: manageExternal,
			want:    []corev1.NodeAddress{internal("10.0.0.1"), hostname("node-a")},
		},
		{
			name:    "desired address of an unmanaged type is ignored",
			current: []corev1.NodeAddress{internal("10.0.0.1"), hostname("node-a")},
			managed: manageExternal,
			desired: []resolver.Address{want(resolver.InternalIP, "10.9.9.9"), want(resolver.ExternalIP, "203.0.113.7")},
			want:    []corev1.NodeAddress{internal("10.0.0.1"), external("203.0.113.7"), hostname("node-a")},
		},
		{
			name:    "nothing managed: list unchanged",
			current: []corev1.NodeAddress{hostname("node-a"), internal("10.0.0.1")},
			desired: []resolver.Address{want(resolver.ExternalIP, "203.0.113.7")},
			want:    []corev1.NodeAddress{hostname("node-a"), internal("10.0.0.1")},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			current := slices.Clone(tc.current)
			desired := slices.Clone(tc.desired)
			got := merge(current, tc.managed, desired)
			if !slices.Equal(got, tc.want) || got == nil {
				t.Errorf("Merge =\n  %v\nwant\n  %v", got, tc.want)
			}
			if !slices.Equal(current, tc.current) {
				t.Errorf("Merge modified current: %v, was %v", current, tc.current)
			}
			if !slices.Equal(desired, tc.desired) {
				t.Errorf("Merge modified desired: %v, was %v", desired, tc.desired)
			}
			if again := merge(got, tc.managed, tc.desired); !slices.Equal(again, got) {
				t.Errorf("Merge is not idempotent: second pass gives\n  %v\nafter\n  %v", again, got)
			}
		})
	}
}

// A no-op must be recognisable with slices.Equal, so that the publisher writes nothing.
func TestMergeNoOp(t *testing.T) {
	for _, tc := range []struct {
		name    string
		current []corev1.NodeAddress
		desired []resolver.Address
	}{
		{
			name:    "single stack",
			current: []corev1.NodeAddress{internal("10.0.0.1"), external("203.0.113.7"), hostname("node-a")},
			desired: []resolver.Address{want(resolver.ExternalIP, "203.0.113.7")},
		},
		{
			name: "IPv6-primary dual stack, desired in IPv4-first order",
			current: []corev1.NodeAddress{
				hostname("node-a"), internal("fd00::1"), internal("10.0.0.1"), external("2001:db8::7"), external("203.0.113.7"),
			},
			desired: []resolver.Address{want(resolver.ExternalIP, "203.0.113.7"), want(resolver.ExternalIP, "2001:db8::7")},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := merge(tc.current, manageExternal, tc.desired); !slices.Equal(got, tc.current) {
				t.Errorf("Merge = %v, want it unchanged: %v", got, tc.current)
			}
		})
	}
}

// merge must not write through current's backing array, even with spare capacity.
func TestMergeDoesNotModifyInput(t *testing.T) {
	backing := make([]corev1.NodeAddress, 4, 16)
	copy(backing, []corev1.NodeAddress{hostname("node-a"), hostname("node-a"), external("192.0.2.1"), internal("10.0.0.1")})
	orig := slices.Clone(backing[:cap(backing)])
	got := merge(backing, manageBoth, []resolver.Address{
		want(resolver.InternalIP, "10.0.0.2"), want(resolver.ExternalIP, "203.0.113.7"),
	})
	if !slices.Equal(backing[:cap(backing)], orig) {
		t.Fatalf("Merge modified its input: %v, was %v", backing[:cap(backing)], orig)
	}
	wantList := []corev1.NodeAddress{hostname("node-a"), external("203.0.113.7"), internal("10.0.0.2")}
	if !slices.Equal(got, wantList) {
		t.Fatalf("Merge = %v, want %v", got, wantList)
	}
	got[0].Address = "changed"
	if backing[0].Address != "node-a" {
		t.Fatal("Merge's result shares memory with its input")
	}
}

func TestPrimaryFamily(t *testing.T) {
	for _, tc := range []struct {
		name  string
		addrs []corev1.NodeAddress
		want  resolver.Family
	}{
		{"empty", nil, resolver.IPv4},
		{"no InternalIP", []corev1.NodeAddress{hostname("n"), external("2001:db8::1")}, resolver.IPv4},
		{"IPv4 InternalIP", []corev1.NodeAddress{internal("10.0.0.1"), internal("fd00::1")}, resolver.IPv4},
		{"IPv6 first InternalIP", []corev1.NodeAddress{hostname("n"), external("192.0.2.1"), internal("fd00::1"), internal("10.0.0.1")}, resolver.IPv6},
		{"unparsable InternalIP skipped", []corev1.NodeAddress{internal("not-an-ip"), internal("fd00::1")}, resolver.IPv6},
		{"IPv4-mapped IPv6 is IPv4", []corev1.NodeAddress{internal("::ffff:10.0.0.1")}, resolver.IPv4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := primaryFamily(tc.addrs); got != tc.want {
				t.Errorf("PrimaryFamily(%v) = %v, want %v", tc.addrs, got, tc.want)
			}
		})
	}
}

func TestManaged(t *testing.T) {
	addrs := []corev1.NodeAddress{
		hostname("n"), internal("10.0.0.1"), external("192.0.2.1"), internalDNS("n.internal"),
		internal("fd00::1"), external("2001:db8::1"),
	}
	for _, tc := range []struct {
		name    string
		managed []resolver.AddressType
		want    []corev1.NodeAddress
	}{
		{"none", nil, nil},
		{"InternalIP", manageInternal, []corev1.NodeAddress{internal("10.0.0.1"), internal("fd00::1")}},
		{"ExternalIP", manageExternal, []corev1.NodeAddress{external("192.0.2.1"), external("2001:db8::1")}},
		{"both, in list order", manageBoth, []corev1.NodeAddress{
			internal("10.0.0.1"), external("192.0.2.1"), internal("fd00::1"), external("2001:db8::1"),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := managedOnly(addrs, tc.managed); !slices.Equal(got, tc.want) {
				t.Errorf("Managed = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestWithoutUninitialized(t *testing.T) {
	uninit := corev1.Taint{Key: cloudproviderapi.TaintExternalCloudProvider, Value: "true", Effect: corev1.TaintEffectNoSchedule}
	notReady := corev1.Taint{Key: "node.kubernetes.io/not-ready", Effect: corev1.TaintEffectNoSchedule}
	custom := corev1.Taint{Key: "example.com/dedicated", Value: "db", Effect: corev1.TaintEffectNoExecute}
	for _, tc := range []struct {
		name      string
		taints    []corev1.Taint
		want      []corev1.Taint
		wantFound bool
	}{
		{"nil", nil, []corev1.Taint{}, false},
		{"only uninitialized", []corev1.Taint{uninit}, []corev1.Taint{}, true},
		{"others kept in order", []corev1.Taint{notReady, uninit, custom}, []corev1.Taint{notReady, custom}, true},
		{"every entry with the key removed", []corev1.Taint{uninit, custom, {Key: cloudproviderapi.TaintExternalCloudProvider, Effect: corev1.TaintEffectNoExecute}}, []corev1.Taint{custom}, true},
		{"absent", []corev1.Taint{notReady, custom}, []corev1.Taint{notReady, custom}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := slices.Clone(tc.taints)
			got, found := withoutUninitialized(in)
			if !slices.EqualFunc(got, tc.want, sameTaint) || got == nil {
				t.Errorf("WithoutUninitialized = %v, want %v", got, tc.want)
			}
			if found != tc.wantFound {
				t.Errorf("found = %v, want %v", found, tc.wantFound)
			}
			if !slices.EqualFunc(in, tc.taints, sameTaint) {
				t.Errorf("input modified: %v", in)
			}
		})
	}
}

func sameTaint(a, b corev1.Taint) bool { return a.MatchTaint(&b) && a.Value == b.Value }

// Fuzz inputs are decoded from bytes into small pools, so that duplicates, both families and every
// address type show up often.
var (
	fuzzIPs   = []string{"10.0.0.1", "10.0.0.2", "192.0.2.1", "fd00::1", "fd00::2", "2001:db8::1", "::ffff:10.0.0.3"}
	fuzzNames = []string{"node-a", "node-b", "a.example.com"}
	fuzzTypes = []corev1.NodeAddressType{
		corev1.NodeInternalIP, corev1.NodeExternalIP, corev1.NodeHostName, corev1.NodeInternalDNS, corev1.NodeExternalDNS,
	}
)

func decodeCurrent(b []byte) []corev1.NodeAddress {
	var out []corev1.NodeAddress
	for _, c := range b {
		t := fuzzTypes[int(c)%len(fuzzTypes)]
		i := int(c) / len(fuzzTypes)
		a := fuzzIPs[i%len(fuzzIPs)]
		if t != corev1.NodeInternalIP && t != corev1.NodeExternalIP {
			a = fuzzNames[i%len(fuzzNames)]
		}
		if c == 0xff {
			a = "garbage" // an unparsable InternalIP from a foreign writer
		}
		out = append(out, corev1.NodeAddress{Type: t, Address: a})
	}
	return out
}

func decodeDesired(b []byte) []resolver.Address {
	var out []resolver.Address
	for _, c := range b {
		t := resolver.InternalIP
		if c&1 == 1 {
			t = resolver.ExternalIP
		}
		out = append(out, want(t, fuzzIPs[int(c>>1)%len(fuzzIPs)]))
	}
	return out
}

func decodeManaged(m uint8) []resolver.AddressType {
	var out []resolver.AddressType
	if m&1 != 0 {
		out = append(out, resolver.InternalIP)
	}
	if m&2 != 0 {
		out = append(out, resolver.ExternalIP)
	}
	if m&4 != 0 { // order of Managed must not matter
		slices.Reverse(out)
	}
	return out
}

func FuzzMerge(f *testing.F) {
	f.Add([]byte{}, uint8(3), []byte{})
	f.Add([]byte{2}, uint8(2), []byte{3})                   // Hostname only, ExternalIP managed
	f.Add([]byte{0, 15, 2}, uint8(2), []byte{5, 7})         // kubelet dual-stack, ExternalIP v4+v6
	f.Add([]byte{15, 0, 2}, uint8(3), []byte{0, 6, 1, 11})  // IPv6-primary node
	f.Add([]byte{3, 1, 2, 4, 0, 6, 8}, uint8(2), []byte{1}) // foreign entries around managed ones
	f.Add([]byte{0, 0, 2, 2}, uint8(1), []byte{2, 2})       // duplicates
	f.Add([]byte{0, 1, 2}, uint8(2), []byte{})              // managed type with nothing desired
	f.Add([]byte{0}, uint8(3), []byte{6, 1, 11})            // InternalIP changes family
	f.Add([]byte{255, 0}, uint8(5), []byte{12, 13, 3})      // unparsable InternalIP, reversed managed
	f.Fuzz(func(t *testing.T, cur []byte, m uint8, des []byte) {
		current, managed, desired := decodeCurrent(cur), decodeManaged(m), decodeDesired(des)
		isManaged := func(t corev1.NodeAddressType) bool { return slices.Contains(managed, resolver.AddressType(t)) }
		before := slices.Clone(current)

		got := merge(current, managed, desired)

		if !slices.Equal(current, before) {
			t.Fatalf("Merge modified its input: %v, was %v", current, before)
		}
		seen := map[corev1.NodeAddress]bool{}
		for _, a := range got {
			if seen[a] {
				t.Fatalf("duplicate %v in %v", a, got)
			}
			seen[a] = true
		}
		// Unmanaged entries: exactly the input's, deduplicated, in their relative order.
		var wantUnmanaged, gotUnmanaged []corev1.NodeAddress
		kept := map[corev1.NodeAddress]bool{}
		for _, a := range current {
			if !isManaged(a.Type) && !kept[a] {
				kept[a] = true
				wantUnmanaged = append(wantUnmanaged, a)
			}
		}
		for _, a := range got {
			if !isManaged(a.Type) {
				gotUnmanaged = append(gotUnmanaged, a)
			}
		}
		if !slices.Equal(gotUnmanaged, wantUnmanaged) {
			t.Fatalf("unmanaged entries %v, want %v (input %v)", gotUnmanaged, wantUnmanaged, current)
		}
		// Managed entries: exactly the desired set, each type in one block, primary family first.
		wantManaged := map[corev1.NodeAddress]bool{}
		for _, a := range desired {
			if isManaged(corev1.NodeAddressType(a.Type)) {
				wantManaged[corev1.NodeAddress{Type: corev1.NodeAddressType(a.Type), Address: a.IP.String()}] = true
			}
		}
		primary := primaryFamily(got)
		gotManaged := map[corev1.NodeAddress]bool{}
		for _, typ := range managed {
			first, last := -1, -1
			secondary := false
			for i, a := range got {
				if a.Type != corev1.NodeAddressType(typ) {
					continue
				}
				gotManaged[a] = true
				if first < 0 {
					first = i
				}
				last = i
				fam := resolver.FamilyOf(netip.MustParseAddr(a.Address))
				if fam != primary {
					secondary = true
				} else if secondary {
					t.Fatalf("%s: %s address after a non-primary one in %v", typ, primary, got)
				}
			}
			if first >= 0 && last-first+1 != len(managedOnly(got[first:last+1], []resolver.AddressType{typ})) {
				t.Fatalf("%s entries not contiguous in %v", typ, got)
			}
		}
		if len(gotManaged) != len(wantManaged) {
			t.Fatalf("managed entries %v, want %v", gotManaged, wantManaged)
		}
		for a := range wantManaged {
			if !gotManaged[a] {
				t.Fatalf("missing %v in %v", a, got)
			}
		}
		if again := merge(slices.Clone(before), managed, desired); !slices.Equal(again, got) {
			t.Fatalf("not deterministic: %v then %v", got, again)
		}
		if twice := merge(got, managed, desired); !slices.Equal(twice, got) {
			t.Fatalf("not idempotent: Merge(%v) = %v, Merge of that = %v", current, got, twice)
		}
	})
}
