package soak

import (
	"slices"
	"testing"
	"time"
)

func lft(n int64) *int64 { return &n }

// The oracle's policy, restated: only the usable route source (or the Node's current InternalIP
// while usable) is right; secondary and deprecated addresses never are.
func TestExpect(t *testing.T) {
	primary := kaddr{Family: "inet", Local: "192.0.2.10", Prefixlen: 24, Scope: "global", Dev: "eth0", Label: "eth0"}
	sec := primary
	sec.Local, sec.Secondary = "192.0.2.20", true
	depr := primary
	depr.Local, depr.Preferred = "198.51.100.10", lft(0)
	cases := []struct {
		name         string
		s            sample
		node         string
		wantInternal []string
		wantExternal string
	}{
		{"route sources", sample{Addrs: []kaddr{primary}, Internal: "192.0.2.10", External: "192.0.2.10"}, "", []string{"192.0.2.10"}, "192.0.2.10"},
		{"sticky InternalIP kept", sample{Addrs: []kaddr{primary, depr}, Internal: "192.0.2.10"}, "192.0.2.10", []string{"192.0.2.10"}, ""},
		{"secondary source", sample{Addrs: []kaddr{primary, sec}, Internal: "192.0.2.20", External: "192.0.2.20"}, "", nil, ""},
		{"deprecated source, usable sticky", sample{Addrs: []kaddr{primary, depr}, Internal: "198.51.100.10"}, "192.0.2.10", []string{"192.0.2.10"}, ""},
		{"no route", sample{Addrs: []kaddr{primary}}, "", nil, ""},
		{"node address gone", sample{Addrs: []kaddr{primary}, Internal: "192.0.2.10"}, "192.0.2.99", []string{"192.0.2.10"}, ""},
	}
	for _, c := range cases {
		e := expect(c.s, c.node)
		if !slices.Equal(e.Internal, c.wantInternal) || e.External != c.wantExternal {
			t.Errorf("%s: expect = %+v, want internal %v external %q", c.name, e, c.wantInternal, c.wantExternal)
		}
	}
}

// A removal is excused only when no usable route source lasted longer than the debounce's delay.
func TestStableSource(t *testing.T) {
	a := kaddr{Family: "inet", Local: "192.0.2.10", Prefixlen: 24, Scope: "global", Dev: "eth0"}
	t0 := time.Now()
	at := func(ms int, src string) sample {
		return sample{At: t0.Add(time.Duration(ms) * time.Millisecond), Addrs: []kaddr{a}, Internal: src}
	}
	if _, _, ok := stableSource([]sample{at(0, "192.0.2.10"), at(300, ""), at(600, "192.0.2.10")}, time.Second); ok {
		t.Error("blips counted as a stable source")
	}
	if ip, _, ok := stableSource([]sample{at(0, ""), at(100, "192.0.2.10"), at(1500, "192.0.2.10")}, time.Second); !ok || ip != "192.0.2.10" {
		t.Error("a source present for 1.4 s not found")
	}
}
