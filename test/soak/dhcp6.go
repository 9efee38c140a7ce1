package soak

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// The DHCPv6 uplink: eth4 gets a /128 from dnsmasq (DHCPv6, in the router's namespace) through
// ISC dhclient -6, and carries the route toward the IPv6 external network 2001:db8:ffff::/48 (via
// the router's fe80::1): its lease is the IPv6 ExternalIP, as eth0's address is the IPv4 one. While
// eth4 has no usable lease, the kernel's source toward externalTarget6 is an address of eth3, the
// InternalIP, and the ExternalIP is dropped as equal to it. The oracle knows nothing of this: it
// reads the address and the route from the kernel like every other.
const (
	externalTarget6       = "2001:db8:ffff::1" // only looked up in the node's routing table
	dhcp6Dev, dhcp6Peer   = "eth4", "r-eth4"
	dhcp6MAC              = "02:00:00:00:00:44"
	dhcp6Net, dhcp6Router = "2001:db8:ff00::", "2001:db8:ff00::1"
	dhcp6DUID             = "00:03:00:01:" + dhcp6MAC // DUID-LL of eth4 (dhclient -D LL)
)

// dhcp6 runs the server and the client of the DHCPv6 uplink.
type dhcp6 struct {
	s                 *soak
	dnsmasq, dhclient string
	dir, reserved     string
	server, client    *daemon
}

// startDHCP6 adds the DHCPv6 uplink and waits for its first lease.
func (s *soak) startDHCP6() {
	t := s.t
	d := &dhcp6{s: s, dnsmasq: harness.Tool(t, "dnsmasq", "dnsmasq-base"),
		dhclient: harness.Tool(t, "dhclient", "isc-dhcp-client"), dir: t.TempDir()}
	harness.LinkHost6(s.w.ns, dhcp6Dev, dhcp6MAC, s.w.rtr, dhcp6Peer, harness.Host6{AddrGenMode: 0})
	s.w.rtr.IP("-6", "addr", "add", "fe80::1/64", "dev", dhcp6Peer, "nodad")
	s.w.rtr.IP("-6", "addr", "add", dhcp6Router+"/64", "dev", dhcp6Peer, "nodad")
	s.w.ns.IP("-6", "route", "add", "2001:db8:ffff::/48", "via", "fe80::1", "dev", dhcp6Dev, "metric", "50")
	if err := os.WriteFile(filepath.Join(d.dir, "dhclient-script"), []byte(harness.DHCPv6ClientScript), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.server.kill(); d.client.kill() })
	d.serve(d.free(s.rng))
	d.startClient()
	if !d.waitLease(60 * time.Second) {
		t.Fatalf("no DHCPv6 lease %s on %s within 60 s: %s", d.reserved, dhcp6Dev, readKernel(s.w.ns.Name))
	}
	s.dhcp6 = d
	s.added++
	s.rec.event("dhcp6", "%s leased %s", dhcp6Dev, d.reserved)
}

// free picks an address of the DHCPv6 network other than the router's and the current lease.
func (d *dhcp6) free(r *rand.Rand) string {
	for {
		ip := fmt.Sprintf("%s%x", dhcp6Net, 0x10+r.IntN(0xe0))
		if ip != d.reserved {
			return ip
		}
	}
}

// serve starts dnsmasq with a fresh lease database and ip reserved for eth4's DUID.
func (d *dhcp6) serve(ip string) {
	os.Remove(filepath.Join(d.dir, "dnsmasq.leases"))
	d.reserved = ip
	d.server = background("dnsmasq (DHCPv6)", d.s.w.rtr.Exec(d.dnsmasq, "--no-daemon", "--conf-file=/dev/null",
		"--port=0", "--interface="+dhcp6Peer, "--bind-interfaces", "--dhcp-authoritative",
		"--dhcp-range="+dhcp6Net+"100,"+dhcp6Net+"1ff,64,2m", "--dhcp-host=id:"+dhcp6DUID+",["+ip+"]",
		"--dhcp-leasefile="+filepath.Join(d.dir, "dnsmasq.leases"),
		"--pid-file="+filepath.Join(d.dir, "dnsmasq.pid")))
}

func (d *dhcp6) clientArgs(extra ...string) []string {
	return append([]string{"-6", "-D", "LL", "-sf", filepath.Join(d.dir, "dhclient-script"),
		"-lf", filepath.Join(d.dir, "dhclient.leases"), "-pf", filepath.Join(d.dir, "dhclient.pid")},
		append(extra, dhcp6Dev)...)
}

func (d *dhcp6) startClient() {
	d.client = background("dhclient -6", d.s.w.ns.Exec(d.dhclient, d.clientArgs("-d")...))
}

// waitLease waits until the reserved address is a usable address of eth4.
func (d *dhcp6) waitLease(timeout time.Duration) bool {
	return d.s.wait6(timeout, func(k sample) bool {
		a, ok := k.find(d.reserved)
		return ok && a.Dev == dhcp6Dev && a.usable()
	})
}

// dhcp6Lease changes the lease as a renumbered DHCPv6 network does: the client releases its lease
// (deleting the address), the server restarts with a new reservation (one time in four the same
// one), and a new client binds it. The ExternalIP is held during the gap (or dropped when the gap
// outlasts the removal grace) and moves to the new lease.
func dhcp6Lease(s *soak, r *rand.Rand, _ uplink) {
	d := s.dhcp6
	if d == nil {
		return
	}
	next := d.reserved
	if r.IntN(4) != 0 {
		next = d.free(r)
	}
	d.change(next, dur(r, 0, 2*time.Second))
}

// change releases the lease, restarts dnsmasq with next reserved, and starts a client after pause.
func (d *dhcp6) change(next string, pause time.Duration) bool {
	old := d.reserved
	if out, err := d.s.w.ns.Exec(d.dhclient, d.clientArgs("-r")...).CombinedOutput(); err != nil {
		d.s.rec.event("dhcp6", "dhclient -6 -r: %v: %s", err, out)
	}
	d.client.kill()
	d.s.timeline.add(readKernel(d.s.w.ns.Name))
	d.server.kill()
	os.Remove(filepath.Join(d.dir, "dhclient.leases"))
	d.serve(next)
	time.Sleep(pause) // fault window: the client restarts this long after the server
	d.startClient()
	ok := d.waitLease(60 * time.Second)
	d.s.report6("dhcp6", "%s lease %s -> %s, client back after %s: bound %v", dhcp6Dev, old, next, pause.Round(10*time.Millisecond), ok)
	return ok
}
