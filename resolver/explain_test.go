package resolver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

func TestExplain(t *testing.T) {
	t4, t6 := Target{Type: InternalIP, IP: ip("192.0.2.1")}, Target{Type: ExternalIP, IP: ip("2001:4860:4860::8888")}
	eth0, eth06 := on("eth0", "192.0.2.2/24"), on("eth0", "fd00::2/64")
	eth1 := on("eth1", "10.0.0.10/24")
	both := []AddressType{InternalIP, ExternalIP}
	tests := []struct {
		name    string
		policy  Policy
		sources map[Target]netip.Addr
		addrs   []LocalAddr
		prev    State
		want    []string // Explained.String() of every line, in order
	}{
		{
			name:    "dual-stack host, one IPv4 InternalIP target",
			policy:  Policy{Managed: both, Targets: []Target{t4, t6}},
			sources: map[Target]netip.Addr{t4: ip("192.0.2.2"), t6: ip("fd00::2")},
			addrs:   []LocalAddr{eth0, eth06},
			want: []string{
				"InternalIP IPv4 192.0.2.2 (route to 192.0.2.1): chosen",
				"InternalIP IPv6: " + NoTarget,
				"ExternalIP IPv4: " + NoTarget,
				"ExternalIP IPv6 fd00::2 (route to 2001:4860:4860::8888): chosen",
			},
		},
		{
			name:    "no route, and a source that is not local",
			policy:  Policy{Managed: []AddressType{InternalIP, ExternalIP}, Targets: []Target{t4, {Type: ExternalIP, IP: ip("198.51.100.1")}}},
			sources: map[Target]netip.Addr{{Type: ExternalIP, IP: ip("198.51.100.1")}: ip("203.0.113.9")},
			addrs:   []LocalAddr{eth0},
			want: []string{
				"InternalIP IPv4 (route to 192.0.2.1): no route to target",
				"InternalIP IPv4: no accepted candidate: not published",
				"InternalIP IPv6: " + NoTarget,
				"ExternalIP IPv4 203.0.113.9 (route to 198.51.100.1): source is not assigned to a local interface",
				"ExternalIP IPv4: no accepted candidate: not published",
				"ExternalIP IPv6: " + NoTarget,
			},
		},
		{
			name: "CIDR priority beats the route source; an excluded CIDR is rejected",
			policy: Policy{Managed: []AddressType{InternalIP}, Targets: []Target{t4},
				Types:        map[AddressType]TypePolicy{InternalIP: {CIDRs: cidrs(t, "10.0.0.0/8,192.0.2.0/24")}},
				ExcludeCIDRs: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12")}},
			sources: map[Target]netip.Addr{t4: ip("192.0.2.2")},
			addrs:   []LocalAddr{eth0, eth1, on("eth2", "10.96.0.1/24")},
			want: []string{
				"InternalIP IPv4 10.96.0.1 (interface eth2): rejected: inside an excluded network (service or pod CIDR): 10.96.0.0/12",
				"InternalIP IPv4 192.0.2.2 (route to 192.0.2.1): lower CIDR priority than 10.0.0.10",
				"InternalIP IPv4 10.0.0.10 (interface eth1): chosen",
				"InternalIP IPv6: no accepted candidate: not published", // every interface is a source
			},
		},
		{
			name: "the previous address is kept among equals",
			policy: Policy{Managed: []AddressType{InternalIP}, Targets: []Target{t4},
				Types: map[AddressType]TypePolicy{InternalIP: {Sticky: true}}},
			sources: map[Target]netip.Addr{t4: ip("192.0.2.2")},
			addrs:   []LocalAddr{eth0, eth1},
			prev:    State{Addresses: []Address{{InternalIP, ip("10.0.0.10"), "", 0}}},
			want: []string{
				"InternalIP IPv4 192.0.2.2 (route to 192.0.2.1): previous address 10.0.0.10 kept among equals",
				"InternalIP IPv4 10.0.0.10 (previous address): chosen",
				"InternalIP IPv6: " + NoTarget,
			},
		},
		{
			name: "the route source is preferred among equals; a secondary is rejected",
			policy: Policy{Managed: []AddressType{InternalIP}, Targets: []Target{t4},
				Types: map[AddressType]TypePolicy{InternalIP: {Interfaces: MustInterfaceRegexps("eth.*")}}},
			sources: map[Target]netip.Addr{t4: ip("192.0.2.2")},
			addrs:   []LocalAddr{eth1, secondary(on("eth1", "10.0.0.11/24")), eth0},
			want: []string{
				"InternalIP IPv4 10.0.0.11 (interface eth1): rejected: " + errSecondary.Error(),
				"InternalIP IPv4 192.0.2.2 (route to 192.0.2.1): chosen",
				"InternalIP IPv4 10.0.0.10 (interface eth1): route source 192.0.2.2 preferred among equals",
				"InternalIP IPv6: no accepted candidate: not published",
			},
		},
		{
			name:    "a temporary IPv6 route source stands for its prefix's stable address",
			policy:  Policy{Managed: []AddressType{ExternalIP}, Targets: []Target{t6}},
			sources: map[Target]netip.Addr{t6: ip("fd00::8a3f:1")},
			addrs: []LocalAddr{with(on("eth0", "fd00::8a3f:1/64"), func(a *LocalAddr) { a.Flags = ifaTemporary }),
				with(eth06, func(a *LocalAddr) { a.Flags = ifaManageTempAddr })},
			want: []string{
				"ExternalIP IPv4: " + NoTarget,
				"ExternalIP IPv6 fd00::8a3f:1 (route to 2001:4860:4860::8888): rejected: temporary (IPv6 privacy) address: stands for fd00::2, the stable address of its prefix",
				"ExternalIP IPv6 fd00::2 (route to 2001:4860:4860::8888): chosen",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, e := range explain(tt.policy, tt.sources, tt.addrs, tt.prev) {
				got = append(got, e.String())
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("explanation:\n%s\nwant:\n%s", join(got), join(tt.want))
			}
			addrs, _ := selectAddresses(tt.policy, tt.sources, tt.addrs, tt.prev, &recorder{})
			var chosen []string
			for _, e := range explain(tt.policy, tt.sources, tt.addrs, tt.prev) {
				if e.Chosen {
					chosen = append(chosen, e.Address)
				}
			}
			var selected []string
			for _, a := range addrs {
				selected = append(selected, a.IP.String())
			}
			if !slices.Equal(chosen, selected) {
				t.Errorf("chosen %v, selected %v: the explanation disagrees with the decision", chosen, selected)
			}
		})
	}
}

func join(s []string) string {
	out := ""
	for _, l := range s {
		out += "  " + l + "\n"
	}
	return out
}

// The long-running loop logs the explanation at debug level when the desired addresses change,
// one record per line with stable keys, and records nothing at info level.
func TestLoopLogsExplanationAtDebug(t *testing.T) {
	for _, level := range []slog.Level{slog.LevelDebug, slog.LevelInfo} {
		synctest.Test(t, func(t *testing.T) {
			var buf bytes.Buffer
			log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: level}))
			lt := startLoop(t, LoopConfig{Debounce: ms(100), MaxDelay: time.Second, Logger: log}, nil)
			lt.stop()
			var explained []string
			for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
				var rec struct {
					Msg, Type, Family, Address, From, Reason string
					Chosen                                   bool
				}
				if err := json.Unmarshal([]byte(line), &rec); err != nil {
					t.Fatalf("%v: %s", err, line)
				}
				if rec.Msg == "explain" {
					explained = append(explained, fmt.Sprint(rec.Type, " ", rec.Family, " ", rec.Address, " ", rec.From, " ", rec.Chosen, " ", rec.Reason))
				}
			}
			want := []string{"ExternalIP IPv4 " + ext4.IP.String() + " route to " + target4.String() + " true chosen",
				"ExternalIP IPv6   false " + NoTarget} // no address, no source
			if level == slog.LevelInfo {
				want = nil
			}
			if !slices.Equal(explained, want) {
				t.Errorf("at %v, explain records %q, want %q", level, explained, want)
			}
		})
	}
}

// explain is selectAddresses' decision with its explanation: one line per candidate of each
// managed type and family, in the order the policy considers them.
func explain(p Policy, sources map[Target]netip.Addr, addrs []LocalAddr, prev State) []Explained {
	rec := &recorder{}
	selectAddresses(p, sources, addrs, prev, rec)
	return rec.lines
}
