package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// IPv6 as routers really number hosts: radvd in the router namespace advertises prefixes, the
// node's kernel makes its own addresses from them (SLAAC), and renumbers when the router says so.

const (
	// target6 is the default IPv6 target: the route toward it is looked up, nothing is sent.
	target6 = "2001:4860:4860::8888"
	// nodeMAC gives eth0 the EUI-64 interface identifier ::ff:fe00:10 (addr_gen_mode 0).
	nodeMAC = "02:00:00:00:00:10"
)

// v6Args make the agent manage the InternalIP from the route toward target6 only: the node is
// IPv6-only, and the ExternalIP, which follows the route, is left alone.
var v6Args = []string{"--internal-ip-target=" + target6, "--external-ip-target=none"}

// ra6 is an advertisement of the given prefixes, each with the same lifetimes.
func ra6(preferred, valid int, prefixes ...string) harness.RA {
	var ra harness.RA
	for _, p := range prefixes {
		ra.Prefixes = append(ra.Prefixes, harness.Prefix6{Prefix: p, Preferred: preferred, Valid: valid})
	}
	return ra
}

// raNode creates the Node (with its Hostname) and links the node's eth0 to the router's r-eth0;
// eth0 takes its IPv6 configuration from router advertisements, as h says.
func (e *env) raNode(h harness.Host6) {
	e.t.Helper()
	e.cp.CreateNode(e.t, harness.NodeSpec{Name: e.node, Addresses: []corev1.NodeAddress{harness.Addr(hn, e.node)}})
	harness.LinkHost6(e.ns, "eth0", nodeMAC, e.router, "r-eth0", h)
}

// internal6 is the Node's expected list: the InternalIP ip beside the Hostname.
func (e *env) internal6(ip string) []corev1.NodeAddress {
	return []corev1.NodeAddress{harness.Addr(in, ip), harness.Addr(hn, e.node)}
}

// usable6 waits until eth0 has ip as a settled, preferred address.
func (e *env) usable6(ip string) harness.Addr6 {
	e.t.Helper()
	return harness.WaitAddr6(e.t, e.ns, "eth0", ip+" usable", func(a harness.Addr6) bool { return a.Local == ip && a.Usable() })
}

// wantWrites checks the agent's writes to the Node: n status writes and nothing else.
func (e *env) wantWrites(n int, why string) {
	e.t.Helper()
	if w := e.cp.Writes(e.t, e.node); w["status"] != n || len(w) != 1 {
		e.t.Fatalf("agent writes = %v, want %d status writes: %s", w, n, why)
	}
}

// settled waits until the agent, which runs with --resync-interval=1s, has begun two periodic
// resyncs after since: by then it has resolved the kernel's state as of since, and logged any
// change of the addresses it wants ("desired addresses changed").
func settled(t *testing.T, a *harness.Agent, since time.Time) {
	t.Helper()
	const resync = "nodeaddr_last_resync_timestamp_seconds"
	after := float64(since.UnixNano()) / 1e9
	first := a.WaitMetric(resync, 30*time.Second, func(v float64) bool { return v > after })
	a.WaitMetric(resync, 30*time.Second, func(v float64) bool { return v > first })
}

// waitLog waits until the agent has logged a line containing every one of parts.
func waitLog(t *testing.T, a *harness.Agent, what string, parts ...string) {
	t.Helper()
	harness.Eventually(t, 30*time.Second, 50*time.Millisecond, fmt.Sprintf("the agent logs %s (a line with %q)", what, parts), func() (bool, string) {
		logs := a.Logs()
		for _, l := range strings.Split(logs, "\n") {
			if !slices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(l, p) }) {
				return true, ""
			}
		}
		return false, "log tail: " + lastLine(logs)
	})
}

// changes counts the agent's "desired addresses changed" records.
func changes(a *harness.Agent) int { return strings.Count(a.Logs(), `msg="desired addresses changed"`) }

// A node with only a link-local address gets its first global address from the router. The
// InternalIP appears once duplicate-address detection is over: the route's source in the
// meantime (the link-local address, or with optimistic DAD the tentative address itself) is never
// published, and the Node is written once.
func TestSLAACFirstAddressAfterDAD(t *testing.T) {
	const slaac = "2001:db8:1::ff:fe00:10"
	for _, tc := range []struct {
		name       string
		optimistic bool
		interim    []string // what the agent logs while the address is tentative
	}{
		{"DAD", false, []string{`msg="target not resolved"`, `reason="not of universe scope"`}},
		{"optimistic DAD", true, []string{`msg="target not resolved"`, "source=" + slaac, `reason="tentative`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, "slaac")
			// Three probes: the address stays tentative for three seconds.
			e.raNode(harness.Host6{AddrGenMode: 0, DADTransmits: 3, Optimistic: tc.optimistic})
			harness.WaitAddr6(t, e.ns, "eth0", "usable link-local address", func(a harness.Addr6) bool {
				return a.Scope == "link" && a.Usable()
			})
			a := e.start(append(v6Args, "--log-level=debug")...)
			waitLog(t, a, "that it has no route yet", `msg="target not resolved"`, `reason="no route"`)

			harness.StartRadvd(t, e.router, "r-eth0", ra6(1800, 3600, "2001:db8:1::/64"))
			harness.WaitAddr6(t, e.ns, "eth0", "tentative SLAAC address", func(a harness.Addr6) bool {
				return a.Local == slaac && a.Tentative
			})
			waitLog(t, a, "the route's source refused while DAD runs", tc.interim...)
			e.waitAddresses(e.internal6(slaac))
			if got := e.usable6(slaac); got.Tentative || got.Optimistic {
				t.Fatalf("published %s while the kernel has it as %s", slaac, got)
			}
			e.wantWrites(1, "the SLAAC address once DAD is over, nothing before")
		})
	}
}

// With privacy extensions the kernel's route source is a temporary address, which rotates. The
// Node gets the stable-privacy address of the same prefix, and keeps it while the temporary
// addresses rotate.
func TestIPv6PrivacyAddressesRotateUnpublished(t *testing.T) {
	e := newEnv(t, "privacy")
	// Temporary addresses preferred for 10 s: a new one every few seconds.
	e.raNode(harness.Host6{AddrGenMode: 3, UseTempaddr: 2, TempPreferredLft: 10, TempValidLft: 30})
	harness.StartRadvd(t, e.router, "r-eth0", ra6(1800, 3600, "2001:db8:1::/64"))
	stable := harness.WaitAddr6(t, e.ns, "eth0", "stable-privacy SLAAC address", func(a harness.Addr6) bool {
		return a.Scope == "global" && a.StablePrivacy && !a.Temporary && a.Usable()
	})
	first := e.temporarySource("")

	a := e.start(append(v6Args, "--resync-interval=1s")...)
	e.waitAddresses(e.internal6(stable.Local))
	e.wantWrites(1, "the stable address")

	rotated := e.temporarySource(first)
	t.Logf("temporary route source rotated from %s to %s; stable address %s", first, rotated, stable.Local)
	settled(t, a, time.Now())
	if n := e.cp.Node(t, e.node); harness.FormatAddrs(n.Status.Addresses) != harness.FormatAddrs(e.internal6(stable.Local)) {
		t.Fatalf("addresses after the rotation = %s, want %s", harness.FormatAddrs(n.Status.Addresses), harness.FormatAddrs(e.internal6(stable.Local)))
	}
	if c := changes(a); c != 1 {
		t.Fatalf("desired addresses changed %d times, want once: a rotation is no change", c)
	}
	e.wantWrites(1, "a temporary address rotating is not a node address change")
}

// temporarySource waits until the kernel's source toward target6 is a settled temporary address
// other than not, as `ip -6 addr` shows it, and returns it.
func (e *env) temporarySource(not string) string {
	e.t.Helper()
	var src string
	harness.Eventually(e.t, time.Minute, 100*time.Millisecond, "a new temporary route source", func() (bool, string) {
		src = harness.RouteSource6(e.ns, target6)
		addrs := harness.Addrs6(e.t, e.ns, "eth0")
		return src != not && slices.ContainsFunc(addrs, func(a harness.Addr6) bool {
			return a.Local == src && a.Temporary && a.Usable()
		}), fmt.Sprintf("source %q, addresses %v", src, addrs)
	})
	return src
}

// A router renumbers make-before-break: it announces the new prefix beside the old, then
// deprecates the old (preferred lifetime 0), then withdraws it (valid lifetime 0). The Node keeps
// its address while both prefixes are preferred, moves to the new prefix's address in one write
// when the old one is deprecated, and does not change when the old address finally goes.
func TestRARenumberingMakeBeforeBreak(t *testing.T) {
	const (
		oldPfx, newPfx = "2001:db8:1::/64", "2001:db8:2::/64"
		oldIP, newIP   = "2001:db8:1::ff:fe00:10", "2001:db8:2::ff:fe00:10"
	)
	// The old prefix is valid for 20 s at a time, so that once withdrawn its address expires soon.
	old := harness.Prefix6{Prefix: oldPfx, Preferred: 15, Valid: 20}
	fresh := harness.Prefix6{Prefix: newPfx, Preferred: 1800, Valid: 3600}
	e := newEnv(t, "mbb6")
	e.raNode(harness.Host6{AddrGenMode: 0})
	r := harness.StartRadvd(t, e.router, "r-eth0", harness.RA{Prefixes: []harness.Prefix6{old}})
	e.usable6(oldIP)
	a := e.start(append(v6Args, "--resync-interval=1s")...)
	e.waitAddresses(e.internal6(oldIP))

	// Make: both prefixes preferred. The kernel may now prefer the new address as a source; the
	// InternalIP, the node's identity, stays while its address is preferred.
	r.Announce(harness.RA{Prefixes: []harness.Prefix6{old, fresh}})
	e.usable6(newIP)
	settled(t, a, time.Now())
	t.Logf("both prefixes preferred: the kernel's source toward %s is %s", target6, harness.RouteSource6(e.ns, target6))
	if n := e.cp.Node(t, e.node); harness.FormatAddrs(n.Status.Addresses) != harness.FormatAddrs(e.internal6(oldIP)) {
		t.Fatalf("addresses with both prefixes = %s, want %s", harness.FormatAddrs(n.Status.Addresses), harness.FormatAddrs(e.internal6(oldIP)))
	}
	e.wantWrites(1, "a second preferred prefix does not move the InternalIP")

	// Deprecate the old prefix.
	old.Preferred = 0
	r.Announce(harness.RA{Prefixes: []harness.Prefix6{old, fresh}})
	harness.WaitAddr6(t, e.ns, "eth0", "deprecated "+oldIP, func(a harness.Addr6) bool { return a.Local == oldIP && a.Deprecated })
	e.waitAddresses(e.internal6(newIP))
	e.wantWrites(2, "one move to the new prefix when the old one is deprecated")

	// Break: withdraw it. The kernel removes the address when its valid lifetime runs out.
	old.Valid = 0
	r.Announce(harness.RA{Prefixes: []harness.Prefix6{old, fresh}})
	e.waitGone6(oldIP)
	settled(t, a, time.Now())
	if n := e.cp.Node(t, e.node); harness.FormatAddrs(n.Status.Addresses) != harness.FormatAddrs(e.internal6(newIP)) {
		t.Fatalf("addresses after the withdrawal = %s, want %s", harness.FormatAddrs(n.Status.Addresses), harness.FormatAddrs(e.internal6(newIP)))
	}
	e.wantWrites(2, "the withdrawal of a prefix no longer published changes nothing")
}

// waitGone6 waits until eth0 no longer has ip.
func (e *env) waitGone6(ip string) {
	e.t.Helper()
	harness.Eventually(e.t, time.Minute, 100*time.Millisecond, ip+" gone from eth0", func() (bool, string) {
		addrs := harness.Addrs6(e.t, e.ns, "eth0")
		return !slices.ContainsFunc(addrs, func(a harness.Addr6) bool { return a.Local == ip }), fmt.Sprintf("eth0 has %v", addrs)
	})
}

// Flash renumbering: the router comes back with a new prefix and never deprecates the old one.
// Either the old address is deleted at once (a network manager reconfiguring the link) and the
// agent holds it during the removal grace until the new one is usable, or it lives on until its
// lifetimes run out and the Node moves when it is deprecated. Either way the Node moves to the
// new address in one write, never through an empty list.
func TestRAFlashRenumbering(t *testing.T) {
	const oldIP, newIP = "2001:db8:1::ff:fe00:10", "2001:db8:2::ff:fe00:10"
	t.Run("old addresses deleted", func(t *testing.T) {
		e := newEnv(t, "flash6")
		e.raNode(harness.Host6{AddrGenMode: 0})
		r := harness.StartRadvd(t, e.router, "r-eth0", ra6(1800, 3600, "2001:db8:1::/64"))
		e.usable6(oldIP)
		a := e.start(append(v6Args, "--removal-grace=10s")...)
		e.waitAddresses(e.internal6(oldIP))

		r.Crash()
		e.ns.IP("-6", "addr", "del", oldIP+"/64", "dev", "eth0")
		waitLog(t, a, "that it holds the InternalIP while nothing resolves", `msg="address no longer resolves, holding it"`)
		r.Start(ra6(1800, 3600, "2001:db8:2::/64"))
		e.waitAddresses(e.internal6(newIP))
		e.wantWrites(2, "the new address replaces the held one; no empty list in between")
	})
	t.Run("valid lifetime ending", func(t *testing.T) {
		e := newEnv(t, "flash6")
		e.raNode(harness.Host6{AddrGenMode: 0})
		r := harness.StartRadvd(t, e.router, "r-eth0", ra6(10, 20, "2001:db8:1::/64"))
		e.usable6(oldIP)
		a := e.start(append(v6Args, "--resync-interval=1s")...)
		e.waitAddresses(e.internal6(oldIP))

		r.Crash()
		r.Start(ra6(1800, 3600, "2001:db8:2::/64"))
		harness.WaitAddr6(t, e.ns, "eth0", "deprecated "+oldIP, func(a harness.Addr6) bool { return a.Local == oldIP && a.Deprecated })
		e.waitAddresses(e.internal6(newIP))
		e.wantWrites(2, "one move when the old address is deprecated")
		e.waitGone6(oldIP)
		settled(t, a, time.Now())
		if n := e.cp.Node(t, e.node); harness.FormatAddrs(n.Status.Addresses) != harness.FormatAddrs(e.internal6(newIP)) {
			t.Fatalf("addresses after the old address expired = %s, want %s", harness.FormatAddrs(n.Status.Addresses), harness.FormatAddrs(e.internal6(newIP)))
		}
		e.wantWrites(2, "the old address expiring changes nothing")
	})
}

// An IPv6-only node on a managed network: radvd sets the M flag and announces the prefix on-link
// only, dnsmasq leases addresses by DHCPv6. The lease changes (released, then a new reservation):
// the Node moves from the old lease to the new one in one write, never through an empty list.
func TestDHCPv6LeaseChange(t *testing.T) {
	dnsmasq := harness.Tool(t, "dnsmasq", "dnsmasq-base")
	dhclient := harness.Tool(t, "dhclient", "isc-dhcp-client")
	e := newEnv(t, "dhcp6")
	e.raNode(harness.Host6{AddrGenMode: 0})
	e.router.IP("-6", "addr", "add", "2001:db8:1::1/64", "dev", "r-eth0", "nodad") // dnsmasq serves this network
	harness.StartRadvd(t, e.router, "r-eth0", harness.RA{Managed: true,
		Prefixes: []harness.Prefix6{{Prefix: "2001:db8:1::/64", Preferred: 1800, Valid: 3600, OnLinkOnly: true}}})
	d := &dhcp6{e: e, dnsmasq: dnsmasq, dhclient: dhclient, dir: harness.AgentDir(t)}
	d.script = filepath.Join(d.dir, "dhclient-script")
	if err := os.WriteFile(d.script, []byte(harness.DHCPv6ClientScript), 0o755); err != nil {
		t.Fatal(err)
	}
	d.srv = d.serve("2001:db8:1::50")
	d.cl = d.client()
	a := e.start(v6Args...)
	e.waitAddresses(e.internal6("2001:db8:1::50"))
	e.wantWrites(1, "the first lease")

	d.change("2001:db8:1::60")
	e.waitAddresses(e.internal6("2001:db8:1::60"))
	e.wantWrites(2, "the first lease and the new one, nothing in between")
	// Between the release and the new lease the host had no address: the removal grace held it.
	waitLog(t, a, "that it held the old lease", `msg="address no longer resolves, holding it"`)
	if slices.ContainsFunc(harness.Addrs6(t, e.ns, "eth0"), func(a harness.Addr6) bool { return a.Local == "2001:db8:1::50" }) {
		t.Fatal("the released lease is still on eth0")
	}
}

// dhcp6 is the DHCPv6 scenario's world: dnsmasq in the router namespace with one reservation for
// the node's DUID, dhclient -6 with harness.DHCPv6ClientScript on eth0.
type dhcp6 struct {
	e                 *env
	dir, script       string
	dnsmasq, dhclient string
	srv, cl           *daemon
}

// duid is eth0's DUID-LL (type 3, hardware type 1, nodeMAC): dhclient -D LL sends it.
const duid = "00:03:00:01:" + nodeMAC

func (d *dhcp6) serve(ip string) *daemon {
	return background(d.e.t, "dnsmasq", d.e.router.Exec(d.dnsmasq, "--no-daemon", "--conf-file=/dev/null",
		"--port=0", "--interface=r-eth0", "--bind-interfaces", "--dhcp-authoritative",
		"--dhcp-range=2001:db8:1::100,2001:db8:1::1ff,64,2m", "--dhcp-host=id:"+duid+",["+ip+"]",
		"--dhcp-leasefile="+filepath.Join(d.dir, "dnsmasq.leases"), "--log-dhcp"))
}

func (d *dhcp6) client() *daemon {
	return background(d.e.t, "dhclient", d.e.ns.Exec(d.dhclient, d.clientArgs("-d")...))
}

func (d *dhcp6) clientArgs(extra ...string) []string {
	return append([]string{"-6", "-v", "-D", "LL", "-sf", d.script, "-lf", filepath.Join(d.dir, "dhclient.leases"),
		"-pf", filepath.Join(d.dir, "dhclient.pid")}, append(extra, "eth0")...)
}

// change moves eth0's reservation to ip: the client releases its lease (and deletes the address,
// as a renumbered network's clients do), the server forgets it, and a new client binds ip.
func (d *dhcp6) change(ip string) {
	t := d.e.t
	t.Helper()
	if out, err := d.e.ns.Exec(d.dhclient, d.clientArgs("-r")...).CombinedOutput(); err != nil {
		t.Fatalf("dhclient -6 -r: %v: %s", err, out)
	}
	d.cl.kill()
	d.srv.kill()
	os.Remove(filepath.Join(d.dir, "dnsmasq.leases"))
	os.Remove(filepath.Join(d.dir, "dhclient.leases"))
	d.srv = d.serve(ip)
	d.cl = d.client()
}

// A duplicate address: another host on the link already has it, duplicate-address detection fails,
// and it is never published, even though the policy prefers its network (a ULA before the GUA).
// Once the other host gives the address up and DAD passes, the Node moves to it.
func TestIPv6DuplicateAddressNeverPublished(t *testing.T) {
	const ulaSLAAC, gua = "fd00:1::ff:fe00:10", "2001:db8:1::ff:fe00:10"
	for _, tc := range []struct {
		name, dup string
		prefixes  []string // what the router announces
		static    bool     // the node's ULA address is configured by hand, not by SLAAC
	}{
		// The kernel deletes a SLAAC address that fails DAD and tries again at the next advertisement.
		{name: "SLAAC", dup: ulaSLAAC, prefixes: []string{"fd00:1::/64", "2001:db8:1::/64"}},
		// A static address that fails DAD stays, flagged dadfailed.
		{name: "static", dup: "fd00:1::10", prefixes: []string{"2001:db8:1::/64"}, static: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, "dad6")
			mon := monitorAddrs(t, e.ns)
			e.cp.CreateNode(t, harness.NodeSpec{Name: e.node, Addresses: []corev1.NodeAddress{harness.Addr(hn, e.node)}})
			// One link: the node, the host holding the duplicate and the router's bridge.
			e.router.IP("link", "add", "br0", "type", "bridge", "mcast_snooping", "0")
			e.router.IP("link", "set", "br0", "up")
			harness.LinkHost6(e.ns, "eth0", nodeMAC, e.router, "r-eth0", harness.Host6{AddrGenMode: 0})
			other := harness.NewNetns(t, "other")
			other.Link("eth0", e.router, "r-other")
			for _, p := range []string{"r-eth0", "r-other"} {
				e.router.IP("link", "set", p, "master", "br0")
			}
			other.IP("-6", "addr", "add", tc.dup+"/64", "dev", "eth0", "nodad")
			harness.StartRadvd(t, e.router, "br0", ra6(1800, 3600, tc.prefixes...))
			e.usable6(gua)
			if tc.static {
				e.ns.IP("-6", "addr", "add", tc.dup+"/64", "dev", "eth0")
			}
			mon.wait(tc.dup + "/64 scope global dadfailed")

			// ULAs first, then global unicast: the duplicate would win if it were usable.
			a := e.start("--internal-ip-cidrs=fd00::/8,2000::/3", "--external-ip-target=none",
				"--log-level=debug", "--resync-interval=1s")
			e.waitAddresses(e.internal6(gua))
			if tc.static {
				waitLog(t, a, "the duplicate refused", `msg="candidate skipped"`, "address="+tc.dup,
					`reason="interface eth0: duplicate address detection failed"`)
				// One Warning, however many resyncs refuse the duplicate again.
				e.cp.WaitEvents(t, e.node, "DuplicateAddress", 1, 10*time.Second)
				settled(t, a, time.Now())
				evs := e.cp.Events(t, e.node, "DuplicateAddress")
				want := tc.dup + " on interface eth0 is not published: duplicate address detection failed " +
					"(the kernel flags it dadfailed: another host on the link holds it); remove it from one of the hosts " +
					"(a static address must then be added again for DAD to run)"
				if len(evs) != 1 || evs[0].Type != corev1.EventTypeWarning || evs[0].Count != 1 ||
					evs[0].Source.Component != "nodeaddr" || evs[0].Message != want {
					t.Errorf("DuplicateAddress Events %+v, want one Warning from nodeaddr, count 1, saying %q", evs, want)
				}
				updated := e.cp.Events(t, e.node, "AddressesUpdated")
				if len(updated) != 1 || !strings.Contains(updated[0].Message,
					"\n- InternalIP IPv6 "+tc.dup+" (interface eth0): rejected: duplicate address detection failed\n") {
					t.Errorf("AddressesUpdated Events %d, want one explaining the refusal: %+v", len(updated), updated)
				}
			} else {
				// The kernel deletes the address as DAD fails: the agent only ever sees it tentative.
				waitLog(t, a, "the duplicate refused", `msg="candidate skipped"`, "address="+tc.dup,
					`reason="interface eth0: tentative`)
				mon.wait(tc.dup + "/64 scope global dadfailed") // once more, with the agent running
				settled(t, a, time.Now())
				// The agent never saw a failed address, so it has no failure to report.
				if evs := e.cp.Events(t, e.node, "DuplicateAddress"); len(evs) != 0 {
					t.Errorf("DuplicateAddress Events for a SLAAC address the kernel deleted: %+v", evs)
				}
			}
			if n := e.cp.Node(t, e.node); harness.FormatAddrs(n.Status.Addresses) != harness.FormatAddrs(e.internal6(gua)) {
				t.Fatalf("addresses with a duplicate = %s, want %s", harness.FormatAddrs(n.Status.Addresses), harness.FormatAddrs(e.internal6(gua)))
			}
			e.wantWrites(1, "the GUA, never the duplicate")

			// The other host gives the address up; the node tries again (the next advertisement
			// for SLAAC, the administrator re-adding it for a static address) and DAD passes.
			other.IP("-6", "addr", "del", tc.dup+"/64", "dev", "eth0")
			if tc.static {
				e.ns.IP("-6", "addr", "del", tc.dup+"/64", "dev", "eth0")
				e.ns.IP("-6", "addr", "add", tc.dup+"/64", "dev", "eth0")
			}
			e.usable6(tc.dup)
			e.waitAddresses(e.internal6(tc.dup))
			e.wantWrites(2, "the ULA once it is the node's own")
			e.cp.WaitEvents(t, e.node, "AddressesUpdated", 2, 10*time.Second)
		})
	}
}

// addrMonitor records `ip -6 monitor address` in a namespace: every notification, also of an
// address that lives for a moment only, such as a SLAAC address deleted as its DAD fails.
type addrMonitor struct {
	t   *testing.T
	out *lockedWriter
}

func monitorAddrs(t *testing.T, ns *harness.Netns) *addrMonitor {
	t.Helper()
	m := &addrMonitor{t: t, out: &lockedWriter{b: &strings.Builder{}}}
	cmd := exec.Command("ip", "-n", ns.Name, "-6", "monitor", "address")
	cmd.Stdout, cmd.Stderr = m.out, m.out
	if err := cmd.Start(); err != nil {
		t.Fatalf("ip monitor: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return m
}

func (m *addrMonitor) text() string {
	m.out.mu.Lock()
	defer m.out.mu.Unlock()
	return m.out.b.String()
}

// wait waits until a notification containing s arrives from now on.
func (m *addrMonitor) wait(s string) {
	m.t.Helper()
	start := len(m.text())
	harness.Eventually(m.t, time.Minute, 50*time.Millisecond, fmt.Sprintf("ip monitor shows %q", s), func() (bool, string) {
		text := m.text()
		return strings.Contains(text[start:], s), "\n" + text
	})
}

// A dual-stack node on one link: its IPv4 address from a DHCP server (dnsmasq, dhclient with
// harness.DHCPClientScript), its IPv6 address by SLAAC from a router (radvd). The DHCP lease changes while the
// router renumbers (make-before-break), either inside the renumbering (between the new prefix's
// announcement and the old one's deprecation) or at the same moment as the deprecation. Every list
// the Node shows keeps the primary family first (IPv4 on a Node that had none, IPv6 on a Node whose
// kubelet set an IPv6 node IP), both families always present, and the agent writes once per
// settled state: once per change of its desired addresses, the renumbering's end (the old prefix
// withdrawn) none.
func TestDualStackDHCPRenewalDuringRARenumbering(t *testing.T) {
	dnsmasq := harness.Tool(t, "dnsmasq", "dnsmasq-base")
	dhclient := harness.Tool(t, "dhclient", "isc-dhcp-client")
	const (
		old4, new4     = "192.0.2.50", "192.0.2.60"
		oldPfx, newPfx = "2001:db8:1::/64", "2001:db8:2::/64"
		old6, new6     = "2001:db8:1::ff:fe00:10", "2001:db8:2::ff:fe00:10"
	)
	for _, tc := range []struct {
		name     string
		primary6 bool // the Node is registered with the IPv6 InternalIP (a kubelet's --node-ip)
		atOnce   bool // the lease changes as the old prefix is deprecated, not before
	}{
		{"IPv4 primary, renewal inside the renumbering", false, false},
		{"IPv4 primary, renewal and deprecation at once", false, true},
		{"IPv6 primary, renewal inside the renumbering", true, false},
		{"IPv6 primary, renewal and deprecation at once", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, "dual6")
			// list is the Node's expected list with these addresses, the primary family first.
			list := func(ip4, ip6 string) string {
				if tc.primary6 {
					return harness.FormatAddrs([]corev1.NodeAddress{harness.Addr(in, ip6), harness.Addr(in, ip4), harness.Addr(hn, e.node)})
				}
				return harness.FormatAddrs([]corev1.NodeAddress{harness.Addr(in, ip4), harness.Addr(in, ip6), harness.Addr(hn, e.node)})
			}
			registered := []corev1.NodeAddress{harness.Addr(hn, e.node)}
			if tc.primary6 {
				registered = append([]corev1.NodeAddress{harness.Addr(in, old6)}, registered...)
			}
			e.cp.CreateNode(t, harness.NodeSpec{Name: e.node, Addresses: registered})
			harness.LinkHost6(e.ns, "eth0", nodeMAC, e.router, "r-eth0", harness.Host6{AddrGenMode: 0})
			e.router.IP("addr", "add", "192.0.2.1/24", "dev", "r-eth0")
			d := &dhcp{e: e, dir: harness.AgentDir(t), mac: nodeMAC, dnsmasq: dnsmasq, dhclient: dhclient}
			d.script = filepath.Join(d.dir, "dhclient-script")
			if err := os.WriteFile(d.script, []byte(harness.DHCPClientScript("")), 0o755); err != nil {
				t.Fatal(err)
			}
			d.srv = d.serve(old4)
			d.cl = d.client()
			// The old prefix is valid for 20 s at a time, so that once withdrawn its address expires soon.
			oldP := harness.Prefix6{Prefix: oldPfx, Preferred: 15, Valid: 20}
			fresh := harness.Prefix6{Prefix: newPfx, Preferred: 1800, Valid: 3600}
			r := harness.StartRadvd(t, e.router, "r-eth0", harness.RA{Prefixes: []harness.Prefix6{oldP}})
			e.usable6(old6)
			// Both families before the agent starts: its first write has both.
			e.waitSource4(old4)
			lists := watchNodeLog(t, e.cp, e.node)
			a := e.start("--internal-ip-target=8.8.8.8,"+target6, "--external-ip-target=none", "--resync-interval=1s")
			e.waitList(list(old4, old6))
			e.wantWrites(1, "both families at once")

			// Make: the new prefix beside the old. The InternalIP stays (both are preferred).
			r.Announce(harness.RA{Prefixes: []harness.Prefix6{oldP, fresh}})
			e.usable6(new6)
			settled(t, a, time.Now())
			e.waitList(list(old4, old6))
			e.wantWrites(1, "a second preferred prefix moves nothing")

			oldP.Preferred = 0
			if tc.atOnce {
				d.renew(new4)
				r.Announce(harness.RA{Prefixes: []harness.Prefix6{oldP, fresh}})
			} else {
				d.renew(new4)
				e.waitList(list(new4, old6))
				e.wantWrites(2, "the new lease")
				r.Announce(harness.RA{Prefixes: []harness.Prefix6{oldP, fresh}})
			}
			e.waitList(list(new4, new6))
			settled(t, a, time.Now())

			// Break: the old prefix withdrawn, its address gone when its valid lifetime ends.
			oldP.Valid = 0
			r.Announce(harness.RA{Prefixes: []harness.Prefix6{oldP, fresh}})
			e.waitGone6(old6)
			settled(t, a, time.Now())
			e.waitList(list(new4, new6))

			// Every list the Node showed, in order: the registered one, then only lists of both
			// families with the primary first, each a step of one family or both, ending on the new
			// addresses. One write for each.
			seen := lists.distinct()
			t.Logf("the Node's lists: %q", seen)
			want := [][]string{
				{harness.FormatAddrs(registered), list(old4, old6), list(new4, old6), list(new4, new6)},
				{harness.FormatAddrs(registered), list(old4, old6), list(old4, new6), list(new4, new6)},
				{harness.FormatAddrs(registered), list(old4, old6), list(new4, new6)},
			}
			if !tc.atOnce {
				want = want[:1]
			}
			if !slices.ContainsFunc(want, func(w []string) bool { return slices.Equal(w, seen) }) {
				t.Fatalf("the Node went through %q, want one of %q", seen, want)
			}
			e.wantWrites(len(seen)-1, "one write per settled state")
			if c := changes(a); c != len(seen)-1 {
				t.Fatalf("desired addresses changed %d times, written %d times", c, len(seen)-1)
			}
		})
	}
}

// waitSource4 waits until the node's route toward 8.8.8.8 has the source ip (the DHCP lease bound
// and its default route added).
func (e *env) waitSource4(ip string) {
	e.t.Helper()
	harness.Eventually(e.t, time.Minute, 100*time.Millisecond, "a route toward 8.8.8.8 from "+ip, func() (bool, string) {
		out, _ := exec.Command("ip", "-n", e.ns.Name, "-4", "route", "get", "8.8.8.8").Output()
		return strings.Contains(string(out), " src "+ip+" "), fmt.Sprintf("%q", out)
	})
}

// waitList waits until the Node's address list, formatted, is want.
func (e *env) waitList(want string) {
	e.t.Helper()
	e.cp.WaitNode(e.t, e.node, 60*time.Second, "addresses "+want, func(n *corev1.Node) bool {
		return harness.FormatAddrs(n.Status.Addresses) == want
	})
}
