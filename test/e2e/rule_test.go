package e2e

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// Policy routing on a multi-homed host: an `ip rule` that sends the target's lookup to another
// table moves ExternalIP to that table's uplink through the rule's own netlink event (no periodic
// resync runs), and deleting the rule moves it back. One write each.
func TestPolicyRuleMovesTheRouteSource(t *testing.T) {
	e := newEnv(t, "rule")
	e.cp.CreateNode(t, harness.NodeSpec{Name: e.node})
	e.uplink("eth0", "192.0.2.10/24", "192.0.2.1", 100)
	e.uplink("eth1", "198.51.100.10/24", "198.51.100.1", 200)
	e.ns.IP("route", "add", "default", "via", "198.51.100.1", "dev", "eth1", "table", "100")
	a := e.start("--internal-ip-target=none", "--external-ip-target=8.8.8.8", "--resync-interval=0")
	e.waitAddresses([]corev1.NodeAddress{harness.Addr(ext, "192.0.2.10")})

	e.ns.IP("rule", "add", "to", "8.8.8.8/32", "lookup", "100", "priority", "1000")
	e.waitAddresses([]corev1.NodeAddress{harness.Addr(ext, "198.51.100.10")})
	e.ns.IP("rule", "del", "priority", "1000")
	e.waitAddresses([]corev1.NodeAddress{harness.Addr(ext, "192.0.2.10")})
	if w := e.statusWrites(); w != 3 {
		t.Errorf("status writes = %d, want 3 (start, rule added, rule deleted)", w)
	}
	if r := a.Metric(`nodeaddr_netlink_events_total{kind="rule"}`); r < 2 {
		t.Errorf(`nodeaddr_netlink_events_total{kind="rule"} = %v, want at least 2`, r)
	}
}
