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
		e := expect(c.s, c.node, "", "")
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
	if _, _, ok := stableSource([]sample{at(0, "192.0.2.10"), at(300, ""), at(600, "192.0.2.10")}, time.Second, sample.internal4); ok {
		t.Error("blips counted as a stable source")
	}
	if ip, _, ok := stableSource([]sample{at(0, ""), at(100, "192.0.2.10"), at(1500, "192.0.2.10")}, time.Second, sample.internal4); !ok || ip != "192.0.2.10" {
		t.Error("a source present for 1.4 s not found")
	}
}

// The IPv6 half of the oracle: a temporary route source stands for the stable address of its
// prefix on its interface (the mngtmpaddr one); temporary, tentative and deprecated addresses are
// never right; the Node's current IPv6 InternalIP stays while usable (both prefixes preferred).
func TestExpect6(t *testing.T) {
	a6 := func(ip string, f func(*kaddr)) kaddr {
		a := kaddr{Family: "inet6", Local: ip, Prefixlen: 64, Scope: "global", Dev: "eth3"}
		if f != nil {
			f(&a)
		}
		return a
	}
	stable := a6("2001:db8:1::ff:fe00:33", func(a *kaddr) { a.MngTmpAddr = true })
	temp := a6("2001:db8:1::8a3f:1", func(a *kaddr) { a.Temporary = true })
	stable2 := a6("2001:db8:2::ff:fe00:33", func(a *kaddr) { a.MngTmpAddr = true })
	temp2 := a6("2001:db8:2::77:1", func(a *kaddr) { a.Temporary = true })
	tent2 := stable2
	tent2.Tentative = true
	depr := stable
	depr.Deprecated, depr.Preferred = true, lft(0)
	deprTemp := temp
	deprTemp.Deprecated = true
	other := a6("2001:db8:1::99", func(a *kaddr) { a.Dev = "eth5" })
	cases := []struct {
		name string
		s    sample
		node string
		want []string
	}{
		{"temporary source stands for the stable address", sample{Addrs: []kaddr{stable, temp}, Internal6: temp.Local}, "", []string{stable.Local}},
		{"stable source", sample{Addrs: []kaddr{stable}, Internal6: stable.Local}, "", []string{stable.Local}},
		{"temporary without a stable address", sample{Addrs: []kaddr{temp}, Internal6: temp.Local}, "", nil},
		{"a stable address on another interface does not count", sample{Addrs: []kaddr{temp, other}, Internal6: temp.Local}, "", nil},
		{"both prefixes preferred: the Node's stays", sample{Addrs: []kaddr{stable, temp, stable2, temp2}, Internal6: temp2.Local}, stable.Local, []string{stable2.Local, stable.Local}},
		{"old prefix deprecated", sample{Addrs: []kaddr{depr, deprTemp, stable2, temp2}, Internal6: temp2.Local}, stable.Local, []string{stable2.Local}},
		{"new address tentative", sample{Addrs: []kaddr{tent2}, Internal6: tent2.Local}, stable.Local, nil},
		{"published temporary is wrong", sample{Addrs: []kaddr{stable, temp}, Internal6: temp.Local}, temp.Local, []string{stable.Local}},
	}
	for _, c := range cases {
		e := expect(c.s, "", c.node, "")
		if !slices.Equal(e.Internal6, c.want) || len(e.Internal) != 0 {
			t.Errorf("%s: expect = %+v, want IPv6 %v", c.name, e, c.want)
		}
	}

	// The DHCPv6 uplink's lease is the IPv6 ExternalIP, never the InternalIP, even as the route's
	// source toward target6 (eth3 without a usable address); without a usable lease the ExternalIP
	// follows the route to eth3 (dropped by the caller when equal to the InternalIP).
	lease := a6("2001:db8:ff00::42", func(a *kaddr) { a.Dev, a.Prefixlen = dhcp6Dev, 128 })
	e := expect(sample{Addrs: []kaddr{stable, temp, lease}, Internal6: temp.Local, External6: lease.Local}, "", "", "")
	if !slices.Equal(e.Internal6, []string{stable.Local}) || !slices.Equal(e.External6, []string{lease.Local}) {
		t.Errorf("lease as ExternalIP: expect = %+v", e)
	}
	e = expect(sample{Addrs: []kaddr{tent2, lease}, Internal6: lease.Local, External6: lease.Local}, "", lease.Local, "")
	if len(e.Internal6) != 0 || !slices.Equal(e.External6, []string{lease.Local}) {
		t.Errorf("lease as the only source: expect = %+v, want no IPv6 InternalIP", e)
	}
	e = expect(sample{Addrs: []kaddr{stable, temp}, Internal6: temp.Local, External6: temp.Local}, "", stable.Local, "")
	if !slices.Equal(e.External6, []string{stable.Local}) {
		t.Errorf("no lease: expect = %+v, want the ExternalIP candidate %s", e, stable.Local)
	}
	// A new lease beside the old one on the same link: the kernel's newest-first choice is no
	// decision, so the Node's current ExternalIP stays acceptable while usable; on another link not.
	lease2 := a6("2001:db8:ff00::43", func(a *kaddr) { a.Dev, a.Prefixlen = dhcp6Dev, 128 })
	e = expect(sample{Addrs: []kaddr{stable, lease2, lease}, Internal6: stable.Local, External6: lease2.Local}, "", stable.Local, lease.Local)
	if !slices.Equal(e.External6, []string{lease2.Local, lease.Local}) {
		t.Errorf("new lease beside the old: expect = %+v, want both", e)
	}
	e = expect(sample{Addrs: []kaddr{stable, lease2}, Internal6: stable.Local, External6: lease2.Local}, "", stable.Local, stable.Local)
	if !slices.Equal(e.External6, []string{lease2.Local}) {
		t.Errorf("the current ExternalIP on another link: expect = %+v, want only the route's", e)
	}
}

// The timeline stamps a sample with the kernel's notification of the change it shows, when no
// other notification came during its read and none since the previous sample already covered it;
// otherwise with when its read began (a read that took a second to start on a busy
// machine placed an address's end of duplicate address detection after the agent's write).
func TestTimelineStampsFromNotifications(t *testing.T) {
	t0 := time.Now()
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	read := func(from, to int, src string) sample {
		return sample{At: ms(from), Read: ms(from), Done: ms(to), Internal: src}
	}
	k := newKernelTimeline()
	k.add(read(0, 50, "a"))
	k.note(ms(100))
	k.add(read(900, 1000, "b")) // the read began 800 ms after the notification
	k.note(ms(1200))
	k.add(read(1150, 1300, "c")) // a notification during the read: the state may be either
	k.add(read(1400, 1450, "d")) // the state since the notification during the previous read
	k.add(read(1600, 1650, "d")) // no notification since the previous sample
	var got []int
	for _, s := range k.samples {
		got = append(got, int(s.At.Sub(t0)/time.Millisecond))
	}
	if want := []int{0, 100, 1150, 1200, 1600}; !slices.Equal(got, want) {
		t.Errorf("samples stamped at %v ms, want %v", got, want)
	}
	// By when the reads began, the state "b" was not there until 900 ms.
	var srcs []string
	for _, s := range k.betweenRead(ms(50), ms(850)) {
		srcs = append(srcs, s.Internal)
	}
	if want := []string{"a"}; !slices.Equal(srcs, want) {
		t.Errorf("by read time, the states in [50 ms, 850 ms] are %v, want %v", srcs, want)
	}
}

// A carrier-down phase counts against invariant 5's bound only when it may have lasted the agent's
// link hold: the "30 ms" phases of a storm on a busy machine can last hundreds.
func TestHeldPhases(t *testing.T) {
	ms := func(ns ...int) []time.Duration {
		var out []time.Duration
		for _, n := range ns {
			out = append(out, time.Duration(n)*time.Millisecond)
		}
		return out
	}
	for _, c := range []struct {
		phases []time.Duration
		want   int
	}{
		{nil, 0},
		{ms(31, 35, 40, 99), 0},
		{ms(31, 100, 40, 350, 1200), 3},
	} {
		if got := heldPhases(c.phases, linkHold); got != c.want {
			t.Errorf("heldPhases(%v) = %d, want %d", c.phases, got, c.want)
		}
	}
}
