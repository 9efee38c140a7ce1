package nat

import (
	"strings"
	"testing"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// The world itself, checked with coturn's own client from the node namespace: each server sees
// the node at the router's SNAT address, and a per-destination rule makes one server see another.
// If this fails, the scenarios above test nothing.
func TestNATTopology(t *testing.T) {
	w := newWorld(t, "nat-topology", 2)
	mapped := func(server string) string {
		t.Helper()
		out, err := w.h.NS.Exec("turnutils_stunclient", "-p", "3478", "-L", "10.0.1.10", server).CombinedOutput()
		if err != nil {
			t.Fatalf("turnutils_stunclient %s: %v: %s", server, err, out)
		}
		for _, l := range strings.Split(string(out), "\n") {
			if _, rest, ok := strings.Cut(l, "UDP reflexive addr: "); ok {
				host, _, _ := strings.Cut(strings.TrimSpace(rest), ":")
				return host
			}
		}
		t.Fatalf("turnutils_stunclient %s: no reflexive address in %s", server, out)
		return ""
	}
	for _, s := range w.servers {
		if got := mapped(s.Addr); got != "203.0.113.10" {
			t.Errorf("%s sees the node at %s, want 203.0.113.10", s.Addr, got)
		}
	}
	w.nat.SetSNAT(harness.SNAT{From: "10.0.0.0/16", To: "198.51.100.2", Public: "203.0.113.99"},
		harness.SNAT{From: "10.0.0.0/16", Public: "203.0.113.10"})
	if a, b := mapped("198.51.100.1"), mapped("198.51.100.2"); a != "203.0.113.10" || b != "203.0.113.99" {
		t.Errorf("after the per-destination rule: %s and %s, want 203.0.113.10 and 203.0.113.99", a, b)
	}
}
