package resolver

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func TestParseTargets(t *testing.T) {
	v4 := netip.MustParseAddr("192.0.2.1")
	v6 := netip.MustParseAddr("2001:db8::1")
	tests := []struct {
		name    string
		in      string
		want    []Target
		wantErr string // substring of the error; empty: no error
	}{
		{name: "empty string disables the type", in: "", want: nil},
		{name: "only separators and spaces", in: " , ,", want: nil},
		{name: "IPv4", in: "192.0.2.1", want: []Target{{Type: ExternalIP, IP: v4}}},
		{name: "IPv6", in: "2001:db8::1", want: []Target{{Type: ExternalIP, IP: v6}}},
		{name: "dual stack", in: "192.0.2.1,2001:db8::1", want: []Target{{Type: ExternalIP, IP: v4}, {Type: ExternalIP, IP: v6}}},
		{name: "dual stack, IPv6 first, spaces", in: "  2001:db8::1 ,\t192.0.2.1 ", want: []Target{{Type: ExternalIP, IP: v6}, {Type: ExternalIP, IP: v4}}},
		{name: "IPv4-mapped IPv6 is IPv4", in: "::ffff:192.0.2.1", want: []Target{{Type: ExternalIP, IP: v4}}},
		{name: "IPv4-mapped IPv6 next to IPv6", in: "::ffff:192.0.2.1,2001:db8::1", want: []Target{{Type: ExternalIP, IP: v4}, {Type: ExternalIP, IP: v6}}},
		{name: "two IPv4", in: "192.0.2.1,198.51.100.1", wantErr: "two IPv4 targets"},
		{name: "two IPv6", in: "2001:db8::1,2001:db8::2", wantErr: "two IPv6 targets"},
		{name: "IPv4 and IPv4-mapped IPv6", in: "192.0.2.1,::ffff:198.51.100.1", wantErr: "two IPv4 targets"},
		{name: "garbage", in: "not-an-ip", wantErr: "is neither an IP address nor apiserver"},
		{name: "garbage after a valid one", in: "192.0.2.1,x", wantErr: "is neither an IP address nor apiserver"},
		{name: "CIDR", in: "192.0.2.0/24", wantErr: "is neither an IP address nor apiserver"},
		{name: "zone", in: "2001:db8::1%eth0", wantErr: "is neither an IP address nor apiserver"},
		{name: "apiserver, with a fallback per family", in: "apiserver,192.0.2.1,2001:db8::1", want: []Target{
			{Type: ExternalIP, IP: netip.IPv4Unspecified(), APIServer: true}, {Type: ExternalIP, IP: netip.IPv6Unspecified(), APIServer: true},
			{Type: ExternalIP, IP: v4}, {Type: ExternalIP, IP: v6}}},
		{name: "apiserver in any case, after an IP", in: "192.0.2.1, APIServer", want: []Target{{Type: ExternalIP, IP: v4},
			{Type: ExternalIP, IP: netip.IPv4Unspecified(), APIServer: true}, {Type: ExternalIP, IP: netip.IPv6Unspecified(), APIServer: true}}},
		{name: "apiserver twice", in: "apiserver,192.0.2.1,apiserver", wantErr: "apiserver is listed twice"},
		{name: "IPv4 loopback", in: "127.0.0.1", wantErr: "cannot be a target"},
		{name: "IPv6 loopback", in: "::1", wantErr: "cannot be a target"},
		{name: "IPv4 multicast", in: "224.0.0.1", wantErr: "cannot be a target"},
		{name: "IPv6 multicast", in: "ff02::1", wantErr: "cannot be a target"},
		{name: "IPv4 link-local", in: "169.254.1.1", wantErr: "cannot be a target"},
		{name: "IPv6 link-local", in: "fe80::1", wantErr: "cannot be a target"},
		{name: "IPv4 unspecified", in: "0.0.0.0", wantErr: "cannot be a target"},
		{name: "IPv6 unspecified", in: "::", wantErr: "cannot be a target"},
		{name: "IPv4-mapped loopback", in: "::ffff:127.0.0.1", wantErr: "cannot be a target"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseTargets(ExternalIP, tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseTargets(%q) = %v, %v; want error containing %q", tt.in, got, err, tt.wantErr)
				}
				if got != nil {
					t.Errorf("ParseTargets(%q) returned targets %v with an error", tt.in, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseTargets(%q): %v", tt.in, err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("ParseTargets(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseTargetsKeepsType(t *testing.T) {
	got, err := ParseTargets(InternalIP, "10.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	want := []Target{{Type: InternalIP, IP: netip.MustParseAddr("10.0.0.1")}}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func addr(t AddressType, ip string) Address {
	return Address{Type: t, IP: netip.MustParseAddr(ip)}
}

func TestStateNormalize(t *testing.T) {
	in := State{
		Managed: []AddressType{InternalIP, ExternalIP},
		Addresses: []Address{
			addr(ExternalIP, "2001:db8::2"),
			addr(InternalIP, "2001:db8::1"),
			addr(ExternalIP, "198.51.100.2"),
			addr(InternalIP, "192.0.2.1"),
		},
	}
	orig := slices.Clone(in.Addresses)
	got := in.Normalize()
	want := []Address{
		addr(InternalIP, "192.0.2.1"),
		addr(InternalIP, "2001:db8::1"),
		addr(ExternalIP, "198.51.100.2"),
		addr(ExternalIP, "2001:db8::2"),
	}
	if !slices.Equal(got.Addresses, want) {
		t.Errorf("Normalize().Addresses = %v, want %v", got.Addresses, want)
	}
	if !slices.Equal(got.Managed, in.Managed) {
		t.Errorf("Normalize().Managed = %v, want %v", got.Managed, in.Managed)
	}
	if !slices.Equal(in.Addresses, orig) {
		t.Errorf("Normalize modified its receiver: %v, was %v", in.Addresses, orig)
	}

	// The managed order decides the type order; unmanaged types go last.
	in.Managed = []AddressType{ExternalIP}
	got = in.Normalize()
	want = []Address{
		addr(ExternalIP, "198.51.100.2"),
		addr(ExternalIP, "2001:db8::2"),
		addr(InternalIP, "192.0.2.1"),
		addr(InternalIP, "2001:db8::1"),
	}
	if !slices.Equal(got.Addresses, want) {
		t.Errorf("Normalize().Addresses with Managed=[ExternalIP] = %v, want %v", got.Addresses, want)
	}
}

func TestStateEqual(t *testing.T) {
	both := []AddressType{InternalIP, ExternalIP}
	base := State{Managed: both, Addresses: []Address{
		{Type: InternalIP, IP: netip.MustParseAddr("192.0.2.1"), Interface: "eth0"},
		addr(InternalIP, "2001:db8::1"),
	}}
	tests := []struct {
		name  string
		other State
		want  bool
	}{
		{name: "same", other: base, want: true},
		{name: "other order", other: State{Managed: both, Addresses: []Address{
			addr(InternalIP, "2001:db8::1"), addr(InternalIP, "192.0.2.1")}}, want: true},
		{name: "interface ignored", other: State{Managed: both, Addresses: []Address{
			{Type: InternalIP, IP: netip.MustParseAddr("192.0.2.1"), Interface: "eth1"},
			addr(InternalIP, "2001:db8::1")}}, want: true},
		{name: "other address", other: State{Managed: both, Addresses: []Address{
			addr(InternalIP, "192.0.2.2"), addr(InternalIP, "2001:db8::1")}}, want: false},
		{name: "other type", other: State{Managed: both, Addresses: []Address{
			addr(ExternalIP, "192.0.2.1"), addr(InternalIP, "2001:db8::1")}}, want: false},
		{name: "one address missing", other: State{Managed: both, Addresses: []Address{
			addr(InternalIP, "192.0.2.1")}}, want: false},
		{name: "other managed types", other: State{Managed: []AddressType{InternalIP}, Addresses: base.Addresses}, want: false},
		{name: "empty", other: State{}, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := base.Equal(tt.other); got != tt.want {
				t.Errorf("Equal = %v, want %v", got, tt.want)
			}
			if got := tt.other.Equal(base); got != tt.want {
				t.Errorf("reverse Equal = %v, want %v", got, tt.want)
			}
		})
	}
	if !(State{}).Equal(State{Managed: []AddressType{}, Addresses: []Address{}}) {
		t.Error("nil and empty states differ")
	}
}

func TestStateGetAndString(t *testing.T) {
	s := State{Managed: []AddressType{InternalIP}, Addresses: []Address{
		addr(InternalIP, "2001:db8::1"), addr(InternalIP, "192.0.2.1")}}
	if a, ok := s.Get(InternalIP, IPv4); !ok || a != addr(InternalIP, "192.0.2.1") {
		t.Errorf("Get(InternalIP, IPv4) = %v, %v", a, ok)
	}
	if a, ok := s.Get(ExternalIP, IPv6); ok {
		t.Errorf("Get(ExternalIP, IPv6) = %v, true; want nothing", a)
	}
	if got, want := s.String(), "[InternalIP=192.0.2.1 InternalIP=2001:db8::1]"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if got := FamilyOf(netip.MustParseAddr("::ffff:192.0.2.1")); got != IPv4 {
		t.Errorf("FamilyOf(IPv4-mapped) = %v, want IPv4", got)
	}
}
