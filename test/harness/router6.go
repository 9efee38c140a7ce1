package harness

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Prefix6 is one prefix a router advertises (a Prefix Information option) with its lifetimes in
// seconds. Preferred 0 deprecates the prefix's addresses at once; Valid 0 withdraws the prefix, but
// the kernel keeps an address until the valid lifetime it already had runs out (RFC 4862 5.5.3e,
// unless net.ipv6.conf.DEV.ra_honor_pio_life=1).
type Prefix6 struct {
	Prefix           string
	Preferred, Valid int
	// OnLinkOnly clears the autonomous flag: hosts make no SLAAC address from it (DHCPv6 networks).
	OnLinkOnly bool
}

// RA is what a router advertises.
type RA struct {
	// Managed sets the M flag: hosts get their addresses from DHCPv6.
	Managed  bool
	Prefixes []Prefix6
}

// Radvd is radvd, a real IPv6 router daemon, advertising on one interface of a router namespace
// every 3 to 4 seconds, as the default router for 30 minutes.
type Radvd struct {
	t        testing.TB
	ns       *Netns
	dev, bin string
	dir      string
	p        *proc
}

// StartRadvd turns IPv6 forwarding on in router (radvd refuses to advertise otherwise), waits until
// dev has a usable link-local address (the source of every advertisement) and starts radvd with ra.
// Its config, pid and log files live in a directory of the test; it is killed when t ends, and its
// log is shown when t failed.
func StartRadvd(t testing.TB, router *Netns, dev string, ra RA) *Radvd {
	t.Helper()
	r := &Radvd{t: t, ns: router, dev: dev, bin: Tool(t, "radvd", "radvd")}
	dir, err := os.MkdirTemp("", "nodeaddr-radvd-")
	if err != nil {
		t.Fatal(err)
	}
	r.dir = dir
	t.Cleanup(func() {
		r.Crash()
		if t.Failed() {
			t.Logf("radvd log:\n%s", tailFile(r.file("log"), 40))
		}
		os.RemoveAll(dir)
	})
	router.Sysctl("net.ipv6.conf.all.forwarding", "1")
	WaitAddr6(t, router, dev, "usable link-local address", func(a Addr6) bool { return a.Scope == "link" && a.Usable() })
	r.Start(ra)
	return r
}

func (r *Radvd) file(name string) string { return filepath.Join(r.dir, name) }

// Start starts radvd (again, after Crash) advertising ra.
func (r *Radvd) Start(ra RA) {
	r.t.Helper()
	if r.p != nil {
		r.t.Fatal("radvd is already running")
	}
	r.write(ra)
	cmd := r.ns.Exec(r.bin, "--nodaemon", "--logmethod=stderr", "--config="+r.file("radvd.conf"),
		"--pidfile="+r.file("radvd.pid"))
	p, err := startLogged(cmd, r.file("log"))
	if err != nil {
		r.t.Fatalf("start radvd: %v", err)
	}
	r.p = p
}

// Announce changes what the router advertises: radvd rereads its configuration on SIGHUP.
func (r *Radvd) Announce(ra RA) {
	r.t.Helper()
	r.write(ra)
	if err := r.p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		r.t.Fatalf("reload radvd: %v", err)
	}
}

// Crash kills radvd without its farewell advertisement (router lifetime 0): a router that reboots
// or loses power. Hosts keep its prefixes and default route until their lifetimes end.
func (r *Radvd) Crash() {
	if r.p == nil {
		return
	}
	r.p.cmd.Process.Kill()
	<-r.p.done
	r.p = nil
	os.Remove(r.file("radvd.pid"))
}

func (r *Radvd) write(ra RA) {
	r.t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "interface %s {\n  AdvSendAdvert on;\n  MinRtrAdvInterval 3;\n  MaxRtrAdvInterval 4;\n"+
		"  AdvDefaultLifetime 1800;\n  AdvManagedFlag %s;\n", r.dev, onOff(ra.Managed))
	for _, p := range ra.Prefixes {
		fmt.Fprintf(&b, "  prefix %s {\n    AdvOnLink on;\n    AdvAutonomous %s;\n"+
			"    AdvPreferredLifetime %d;\n    AdvValidLifetime %d;\n  };\n",
			p.Prefix, onOff(!p.OnLinkOnly), p.Preferred, p.Valid)
	}
	b.WriteString("};\n")
	if err := os.WriteFile(r.file("radvd.conf"), []byte(b.String()), 0o644); err != nil {
		r.t.Fatal(err)
	}
	if out, err := exec.Command(r.bin, "--configtest", "--config="+r.file("radvd.conf"),
		"--logmethod=stderr").CombinedOutput(); err != nil {
		r.t.Fatalf("radvd --configtest: %v: %s\n%s", err, out, b.String())
	}
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// Host6 is how a host's interface configures IPv6 from router advertisements (sysctls under
// net.ipv6.conf.DEV).
type Host6 struct {
	// AddrGenMode is addr_gen_mode: 0 EUI-64 (from the MAC), 3 stable-privacy with a random secret.
	AddrGenMode int
	// UseTempaddr is use_tempaddr: 2 creates privacy (temporary) addresses and prefers them as
	// sources. TempPreferredLft/TempValidLft shorten their lifetimes (seconds; 0 keeps the default)
	// so that they rotate within a test.
	UseTempaddr                    int
	TempPreferredLft, TempValidLft int
	// DADTransmits is dad_transmits (0 keeps the default, 1: one probe, one second tentative).
	DADTransmits int
	// Optimistic turns on optimistic DAD (RFC 4429): the address is a source while still tentative.
	Optimistic bool
}

// LinkHost6 links ns to router with a veth pair, dev (with the MAC mac) in ns and peerDev in router,
// and configures dev as h says before bringing it up, so that even its link-local address follows
// AddrGenMode. dev accepts router advertisements and makes SLAAC addresses (accept_ra 1, or 2 when
// ns forwards, autoconf 1).
func LinkHost6(ns *Netns, dev, mac string, router *Netns, peerDev string, h Host6) {
	ns.t.Helper()
	ns.IP("link", "add", dev, "address", mac, "type", "veth", "peer", "name", peerDev, "netns", router.Name)
	conf := "net.ipv6.conf." + dev + "."
	acceptRA := "1"
	if out, _ := ns.Exec("sysctl", "-n", conf+"forwarding").Output(); strings.TrimSpace(string(out)) == "1" {
		acceptRA = "2"
	}
	ns.Sysctl(conf+"accept_ra", acceptRA)
	ns.Sysctl(conf+"autoconf", "1")
	ns.Sysctl(conf+"addr_gen_mode", strconv.Itoa(h.AddrGenMode))
	ns.Sysctl(conf+"use_tempaddr", strconv.Itoa(h.UseTempaddr))
	if h.TempPreferredLft > 0 {
		ns.Sysctl(conf+"temp_prefered_lft", strconv.Itoa(h.TempPreferredLft))
	}
	if h.TempValidLft > 0 {
		ns.Sysctl(conf+"temp_valid_lft", strconv.Itoa(h.TempValidLft))
	}
	if h.DADTransmits > 0 {
		ns.Sysctl(conf+"dad_transmits", strconv.Itoa(h.DADTransmits))
	}
	if h.Optimistic {
		ns.Sysctl(conf+"optimistic_dad", "1")
		ns.Sysctl(conf+"use_optimistic", "1")
	}
	router.IP("link", "set", peerDev, "up")
	ns.IP("link", "set", dev, "up")
}

// Addr6 is one IPv6 address as `ip -j -6 addr` reports it.
type Addr6 struct {
	Local         string `json:"local"`
	PrefixLen     int    `json:"prefixlen"`
	Scope         string `json:"scope"`
	Temporary     bool   `json:"temporary"`
	MngTmpAddr    bool   `json:"mngtmpaddr"`
	StablePrivacy bool   `json:"stable-privacy"`
	Tentative     bool   `json:"tentative"`
	Optimistic    bool   `json:"optimistic"`
	Deprecated    bool   `json:"deprecated"`
	DADFailed     bool   `json:"dadfailed"`
	Preferred     int64  `json:"preferred_life_time"`
	Valid         int64  `json:"valid_life_time"`
}

// Usable reports whether the kernel considers the address settled and preferred: not tentative,
// optimistic, DAD-failed or deprecated.
func (a Addr6) Usable() bool {
	return !a.Tentative && !a.Optimistic && !a.DADFailed && !a.Deprecated && a.Preferred != 0
}

func (a Addr6) String() string {
	s := fmt.Sprintf("%s/%d", a.Local, a.PrefixLen)
	for _, f := range []struct {
		on   bool
		name string
	}{{a.Temporary, "temporary"}, {a.MngTmpAddr, "mngtmpaddr"}, {a.StablePrivacy, "stable-privacy"},
		{a.Tentative, "tentative"}, {a.Optimistic, "optimistic"}, {a.Deprecated, "deprecated"}, {a.DADFailed, "dadfailed"}} {
		if f.on {
			s += " " + f.name
		}
	}
	return s
}

// Addrs6 lists dev's IPv6 addresses in ns, in the kernel's order.
func Addrs6(t testing.TB, ns *Netns, dev string) []Addr6 {
	t.Helper()
	out, err := exec.Command("ip", "-n", ns.Name, "-j", "-6", "addr", "show", "dev", dev).Output()
	if err != nil {
		t.Fatalf("ip -6 addr show dev %s: %v", dev, err)
	}
	var links []struct {
		AddrInfo []Addr6 `json:"addr_info"`
	}
	if err := json.Unmarshal(out, &links); err != nil {
		t.Fatalf("ip -j -6 addr: %v: %s", err, out)
	}
	if len(links) == 0 {
		return nil
	}
	return links[0].AddrInfo
}

// WaitAddr6 waits up to a minute until one of dev's IPv6 addresses satisfies cond, and returns it.
func WaitAddr6(t testing.TB, ns *Netns, dev, what string, cond func(Addr6) bool) Addr6 {
	t.Helper()
	var found Addr6
	Eventually(t, time.Minute, 50*time.Millisecond, fmt.Sprintf("%s: %s on %s", ns.Name, what, dev), func() (bool, string) {
		addrs := Addrs6(t, ns, dev)
		for _, a := range addrs {
			if cond(a) {
				found = a
				return true, ""
			}
		}
		return false, fmt.Sprintf("%s has %v", dev, addrs)
	})
	return found
}

// RouteSource6 is the source address the kernel in ns picks toward target (`ip -6 route get`),
// empty without a route.
func RouteSource6(ns *Netns, target string) string {
	out, err := exec.Command("ip", "-n", ns.Name, "-j", "-6", "route", "get", target).Output()
	if err != nil {
		return ""
	}
	var routes []struct {
		PrefSrc string `json:"prefsrc"`
	}
	if json.Unmarshal(out, &routes) != nil || len(routes) == 0 {
		return ""
	}
	return routes[0].PrefSrc
}

// DHCPv6ClientScript is dhclient's hook for DHCPv6, like Debian's dhclient-script: it waits for the
// link-local address, adds the leased address (a /128, with duplicate-address detection and the
// lease's lifetimes), deletes the old one when the lease changes or is released, and never touches
// /etc/resolv.conf. test/e2e and test/soak run dhclient -6 with it.
const DHCPv6ClientScript = `#!/bin/sh
case "$reason" in
PREINIT6)
  ip link set dev "$interface" up
  i=0
  while [ $i -lt 100 ] && ip -6 addr show dev "$interface" scope link tentative | grep -q inet6; do
    sleep 0.1; i=$((i+1))
  done ;;
BOUND6|RENEW6|REBIND6|REBOOT6)
  if [ -n "$old_ip6_address" ] && [ "$old_ip6_address" != "$new_ip6_address" ]; then
    ip -6 addr del "$old_ip6_address/$old_ip6_prefixlen" dev "$interface"
  fi
  if [ -n "$new_ip6_address" ]; then
    ip -6 addr replace "$new_ip6_address/$new_ip6_prefixlen" dev "$interface" \
      valid_lft "$new_max_life" preferred_lft "$new_preferred_life"
  fi ;;
DEPREF6) ip -6 addr change "$cur_ip6_address/$cur_ip6_prefixlen" dev "$interface" preferred_lft 0 ;;
EXPIRE6|RELEASE6|STOP6)
  [ -n "$old_ip6_address" ] && ip -6 addr del "$old_ip6_address/$old_ip6_prefixlen" dev "$interface" ;;
esac
exit 0
`
