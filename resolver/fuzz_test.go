package resolver

import (
	"strings"
	"testing"
)

// FuzzParseTargets: any input either fails or yields at most one routable unicast target per
// family, and formatting the result and parsing it again gives the same targets.
func FuzzParseTargets(f *testing.F) {
	for _, s := range []string{"", "8.8.8.8", "8.8.8.8,2001:4860:4860::8888", " 10.0.0.1 , fd00::1 ",
		"::ffff:1.2.3.4", "1.1.1.1,8.8.8.8", "fe80::1", "127.0.0.1", "::", "224.0.0.1", "x", ",,,", "1.2.3.4/24",
		"fe80::1%eth0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseTargets(ExternalIP, s)
		if err != nil {
			if got != nil {
				t.Fatalf("error %v with targets %v", err, got)
			}
			return
		}
		seen := map[Family]bool{}
		var parts []string
		for _, tg := range got {
			if tg.Type != ExternalIP {
				t.Fatalf("type %s", tg.Type)
			}
			ip := tg.IP
			if !ip.IsValid() || ip.Is4In6() || ip.Zone() != "" || ip.IsLoopback() || ip.IsMulticast() ||
				ip.IsUnspecified() || ip.IsLinkLocalUnicast() {
				t.Fatalf("unusable target %v from %q", ip, s)
			}
			if seen[FamilyOf(ip)] {
				t.Fatalf("two %s targets from %q", FamilyOf(ip), s)
			}
			seen[FamilyOf(ip)] = true
			parts = append(parts, ip.String())
		}
		again, err := ParseTargets(ExternalIP, strings.Join(parts, ","))
		if err != nil || len(again) != len(got) {
			t.Fatalf("round trip of %q: %v %v", s, again, err)
		}
		for i := range got {
			if again[i] != got[i] {
				t.Fatalf("round trip of %q: %v != %v", s, again, got)
			}
		}
	})
}
