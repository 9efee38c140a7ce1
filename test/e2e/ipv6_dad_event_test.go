package e2e

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// A static address whose duplicate-address detection failed (another host on the link holds it)
// is refused on every resolution, and the agent says why once: one Warning Event DuplicateAddress
// on its Node naming the address and its interface, however many resyncs refuse it again. The
// AddressesUpdated Event of the one write explains the refusal too. (The scene is the static case
// of TestIPv6DuplicateAddressNeverPublished; a SLAAC address that fails DAD is deleted by the
// kernel, so the agent only ever sees it tentative and has no failure to report.)
func TestIPv6DuplicateAddressWarningEvent(t *testing.T) {
	const gua, dup = "2001:db8:1::ff:fe00:10", "fd00:1::10"
	e := newEnv(t, "dadev6")
	mon := monitorAddrs(t, e.ns)
	e.cp.CreateNode(t, harness.NodeSpec{Name: e.node, Addresses: []corev1.NodeAddress{addr(hn, e.node)}})
	e.router.IP("link", "add", "br0", "type", "bridge", "mcast_snooping", "0")
	e.router.IP("link", "set", "br0", "up")
	harness.LinkHost6(e.ns, "eth0", nodeMAC, e.router, "r-eth0", harness.Host6{AddrGenMode: 0})
	other := harness.NewNetns(t, "other")
	other.Link("eth0", e.router, "r-other")
	for _, p := range []string{"r-eth0", "r-other"} {
		e.router.IP("link", "set", p, "master", "br0")
	}
	other.IP("-6", "addr", "add", dup+"/64", "dev", "eth0", "nodad")
	harness.StartRadvd(t, e.router, "br0", ra6(1800, 3600, "2001:db8:1::/64"))
	e.usable6(gua)
	e.ns.IP("-6", "addr", "add", dup+"/64", "dev", "eth0")
	mon.wait(dup + "/64 scope global dadfailed")

	// ULAs first, then global unicast: the duplicate would win if it were usable.
	a := e.start("--internal-ip-cidrs=fd00::/8,2000::/3", "--external-ip-target=none", "--resync-interval=1s")
	e.waitAddresses(e.internal6(gua))
	waitEvents(t, e.cp, e.node, "DuplicateAddress", 1)
	settled(t, a, time.Now()) // two more resolutions refuse the duplicate again
	waitEvents(t, e.cp, e.node, "DuplicateAddress", 1)
	ev := e.cp.Events(t, e.node, "DuplicateAddress")[0]
	const want = dup + " on interface eth0 is not published: duplicate address detection failed " +
		"(the kernel flags it dadfailed: another host on the link holds it); remove it from one of the hosts " +
		"(a static address must then be added again for DAD to run)"
	if ev.Type != corev1.EventTypeWarning || ev.Count != 1 || ev.Source.Component != "nodeaddr" || ev.Message != want {
		t.Errorf("DuplicateAddress Event: %s from %s, count %d, message %q; want one Warning from nodeaddr saying %q",
			ev.Type, ev.Source.Component, ev.Count, ev.Message, want)
	}
	e.wantWrites(1, "the GUA, never the duplicate")
	updated := e.cp.Events(t, e.node, "AddressesUpdated")
	if len(updated) != 1 || !strings.Contains(updated[0].Message,
		"\n- InternalIP IPv6 "+dup+" (interface eth0): rejected: duplicate address detection failed\n") {
		t.Errorf("AddressesUpdated Events %d, want one explaining the refusal: %+v", len(updated), updated)
	}
}
