package discovery

import (
	"slices"
	"strings"
	"testing"

	"github.com/nodeaddr/nodeaddr/resolver"
)

func TestParseServers(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		err  string
	}{
		{"", nil, ""},
		{" , ", nil, ""},
		{"stun:192.0.2.1:3478", []string{"192.0.2.1:3478"}, ""},
		{"stun:[2001:db8::1]:3478,stun:stun.example.org:19302", []string{"[2001:db8::1]:3478", "stun.example.org:19302"}, ""},
		{"STUN:Stun.Example.ORG.:3478", []string{"stun.example.org:3478"}, ""},
		{"stun:[::ffff:192.0.2.1]:3478", []string{"192.0.2.1:3478"}, ""},
		{"stun:192.0.2.1", nil, `"stun:192.0.2.1": not stun:HOST:PORT`},
		{"192.0.2.1:3478", nil, `"192.0.2.1:3478": not stun:HOST:PORT`},
		{"stun:2001:db8::1:3478", nil, "an IPv6 address goes in brackets"},
		{"stuns:stun.example.org:5349", nil, "scheme stuns is not supported"},
		{"turn:192.0.2.1:3478", nil, "scheme turn is not supported"},
		{"stun:192.0.2.1:0", nil, `port "0" is not a number from 1 to 65535`},
		{"stun:192.0.2.1:70000", nil, `port "70000"`},
		{"stun:192.0.2.1:http", nil, `port "http"`},
		{"stun:0.0.0.0:3478", nil, "is not a unicast address"},
		{"stun:[fe80::1%eth0]:3478", nil, "is not a unicast address"},
		{"stun:bad_name:3478", nil, `host "bad_name" is neither an IP address nor a DNS name`},
		{"stun:-x.example:3478", nil, "neither an IP address nor a DNS name"},
		{"stun:300.1.1.1:3478", nil, "neither an IP address nor a DNS name"},
		{"stun::3478", nil, `host "" is neither`},
		{"stun:192.0.2.1:3478,stun:192.0.2.1:3478", nil, "listed twice"},
	} {
		got, err := ParseServers(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseServers(%q) error = %v, want one containing %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseServers(%q): %v", tc.in, err)
			continue
		}
		var names []string
		for _, s := range got {
			names = append(names, s.String())
		}
		if !slices.Equal(names, tc.want) {
			t.Errorf("ParseServers(%q) = %v, want %v", tc.in, names, tc.want)
		}
	}
}

func TestCovers(t *testing.T) {
	for _, tc := range []struct {
		servers   string
		four, six bool
	}{
		{"stun:192.0.2.1:3478", true, false},
		{"stun:[2001:db8::1]:3478", false, true},
		{"stun:192.0.2.1:3478,stun:[2001:db8::1]:3478", true, true},
		{"stun:stun.example.net:3478", true, true}, // a name may have both
	} {
		s, err := ParseServers(tc.servers)
		if err != nil {
			t.Fatal(err)
		}
		d := New(Config{Servers: s})
		if d.Covers(resolver.IPv4) != tc.four || d.Covers(resolver.IPv6) != tc.six {
			t.Errorf("%s: covers IPv4 %v IPv6 %v, want %v %v", tc.servers, d.Covers(resolver.IPv4), d.Covers(resolver.IPv6), tc.four, tc.six)
		}
	}
}
