package discovery

import (
	"errors"
	"net/netip"
	"testing"
)

func TestVote(t *testing.T) {
	a, b := netip.MustParseAddr("203.0.113.10"), netip.MustParseAddr("198.51.100.7")
	down := errors.New("timeout")
	ok := func(s string, ip netip.Addr) Reply { return Reply{Server: s, Addr: ip} }
	fail := func(s string) Reply { return Reply{Server: s, Err: down} }
	for _, tc := range []struct {
		name    string
		replies []Reply
		want    Outcome
		addr    netip.Addr
		reason  string
	}{
		{"one server answers", []Reply{ok("s1", a)}, Agreed, a, ""},
		{"two agree", []Reply{ok("s1", a), ok("s2", a)}, Agreed, a, ""},
		{"two of three agree, one down", []Reply{ok("s1", a), fail("s2"), ok("s3", a)}, Agreed, a, ""},
		{"one of two answers: no majority", []Reply{ok("s1", a), fail("s2")}, NoMajority, netip.Addr{},
			"203.0.113.10 from 1 of 2 servers, no majority (s2: timeout)"},
		{"one of three answers", []Reply{fail("s1"), ok("s2", a), fail("s3")}, NoMajority, netip.Addr{},
			"203.0.113.10 from 1 of 3 servers, no majority (s1: timeout; s3: timeout)"},
		{"two disagree", []Reply{ok("s2", b), ok("s1", a)}, Disagreement, netip.Addr{},
			"servers disagree: s1=203.0.113.10 s2=198.51.100.7"},
		{"two of three agree, the third differs", []Reply{ok("s1", a), ok("s2", a), ok("s3", b)}, Disagreement, netip.Addr{},
			"servers disagree: s1=203.0.113.10 s2=203.0.113.10 s3=198.51.100.7"},
		{"all down", []Reply{fail("s1"), fail("s2")}, NoAnswer, netip.Addr{}, "no server answered (s1: timeout; s2: timeout)"},
		{"no replies", nil, NoAnswer, netip.Addr{}, "no server answered ()"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Vote(tc.replies, len(tc.replies))
			if got.Outcome != tc.want || got.Addr != tc.addr || got.Reason != tc.reason {
				t.Errorf("Vote = %+v, want %s %v %q", got, tc.want, tc.addr, tc.reason)
			}
		})
	}
}
