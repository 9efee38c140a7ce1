package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// DHCPClientScript is ISC dhclient's hook for a test's uplink: like Debian's dhclient-script it
// flushes the old lease's address before adding the new one (break-before-make) and adds the
// default route through the server's router option, with metric if it is not empty; it never
// touches /etc/resolv.conf. (dhclient runs its hook with an environment of its own: the metric is
// written into the script, not passed in the environment.)
func DHCPClientScript(metric string) string {
	if metric != "" {
		metric = " metric " + metric
	}
	return `#!/bin/sh
case "$reason" in
PREINIT) ip link set dev "$interface" up ;;
BOUND|RENEW|REBIND|REBOOT)
  if [ "$old_ip_address" != "$new_ip_address" ] || [ "$reason" = BOUND ] || [ "$reason" = REBOOT ]; then
    ip -4 addr flush dev "$interface"
    ip addr add "$new_ip_address/$new_subnet_mask" dev "$interface"
  fi
  for r in $new_routers; do ip route replace default via "$r" dev "$interface"` + metric + `; break; done ;;
EXPIRE|FAIL|RELEASE|STOP) ip -4 addr flush dev "$interface" ;;
esac
exit 0
`
}

// LAN is one shared L2 segment: a bridge in a router namespace (the gateway, LANPrefix+"1"), each
// joined namespace's eth0 a port of it, every address leased by DHCP (dnsmasq in the router's
// namespace, an address reserved per MAC, infinite leases) to ISC dhclient in the node's
// namespace, with the default route through the router. Renumber moves one host's reservation and
// makes its client ask again, as a DHCP server's operator and a reboot would.
type LAN struct {
	t      testing.TB
	Router *Netns
	// NoRouter leases no router option (set before the first Join): the LAN is a host-only
	// network, and the nodes' default route is elsewhere.
	NoRouter bool
	dir      string
	// dnsmasq and dhclient are the tools' paths.
	dnsmasq, dhclient string
	server            *proc
	hosts             []*lanHost
}

type lanHost struct {
	ns       *Netns
	mac, ip  string
	client   *proc
	clientNo int
}

// LANPrefix is the LAN's /24 (documentation addresses: nothing leaves the test's namespaces).
const LANPrefix = "192.0.2."

// NewLAN creates the router namespace with its bridge and starts no server yet (Join does).
func NewLAN(t testing.TB) *LAN {
	t.Helper()
	l := &LAN{t: t, Router: NewNetns(t, "lan"), dir: t.TempDir(),
		dnsmasq: Tool(t, "dnsmasq", "dnsmasq-base"), dhclient: Tool(t, "dhclient", "isc-dhcp-client")}
	l.Router.IP("link", "add", "br0", "type", "bridge")
	l.Router.IP("link", "set", "br0", "up")
	l.Router.IP("addr", "add", LANPrefix+"1/24", "dev", "br0")
	if err := os.WriteFile(filepath.Join(l.dir, "dhclient-script"), []byte(DHCPClientScript("")), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, h := range l.hosts {
			h.client.stop()
		}
		l.server.stop()
	})
	return l
}

// Join links ns's eth0 to the bridge, reserves ip for its MAC and waits until ns holds the lease.
func (l *LAN) Join(ns *Netns, ip string) {
	t := l.t
	t.Helper()
	port := "p-" + strings.TrimPrefix(ns.Name, "na-")
	if len(port) > 15 {
		port = port[:15]
	}
	ns.Link("eth0", l.Router, port)
	l.Router.IP("link", "set", port, "master", "br0")
	out, err := ns.Exec("cat", "/sys/class/net/eth0/address").Output()
	if err != nil {
		t.Fatalf("eth0's MAC in %s: %v", ns.Name, err)
	}
	h := &lanHost{ns: ns, mac: strings.TrimSpace(string(out)), ip: ip}
	l.hosts = append(l.hosts, h)
	l.serve()
	l.startClient(h)
	l.waitLease(h)
}

// Renumber reserves ip for ns instead of its address, restarts the server (a fresh lease
// database: as after a change of its configuration) and restarts ns's client, which asks for
// its old address, is refused, and binds ip (flushing the old address first). It returns when
// ip is on ns's eth0.
func (l *LAN) Renumber(ns *Netns, ip string) {
	t := l.t
	t.Helper()
	i := slices.IndexFunc(l.hosts, func(h *lanHost) bool { return h.ns == ns })
	if i < 0 {
		t.Fatalf("%s has not joined the LAN", ns.Name)
	}
	h := l.hosts[i]
	h.ip = ip
	l.serve()
	h.client.stop()
	l.startClient(h)
	l.waitLease(h)
}

// serve (re)starts dnsmasq with every host's reservation and no lease.
func (l *LAN) serve() {
	t := l.t
	t.Helper()
	l.server.stop()
	leases := filepath.Join(l.dir, "dnsmasq.leases")
	os.Remove(leases)
	args := []string{"--no-daemon", "--conf-file=/dev/null", "--port=0", "--interface=br0", "--bind-interfaces",
		"--dhcp-authoritative", "--dhcp-range=" + LANPrefix + "0,static,255.255.255.0,infinite",
		"--dhcp-leasefile=" + leases,
		"--pid-file=" + filepath.Join(l.dir, "dnsmasq.pid"), "--log-dhcp"}
	if l.NoRouter {
		args = append(args, "--dhcp-option=option:router") // an empty option: no router at all
	} else {
		args = append(args, "--dhcp-option=option:router,"+LANPrefix+"1")
	}
	for _, h := range l.hosts {
		args = append(args, "--dhcp-host="+h.mac+","+h.ip)
	}
	p, err := startLogged(l.Router.Exec(l.dnsmasq, args...), filepath.Join(l.dir, "dnsmasq.log"))
	if err != nil {
		t.Fatalf("start dnsmasq: %v", err)
	}
	l.server = p
}

func (l *LAN) startClient(h *lanHost) {
	t := l.t
	t.Helper()
	h.clientNo++
	base := filepath.Join(l.dir, strings.TrimPrefix(h.ns.Name, "na-"))
	cmd := h.ns.Exec(l.dhclient, "-d", "-4", "-sf", filepath.Join(l.dir, "dhclient-script"), "-lf", base+".leases",
		"-pf", base+".pid", "eth0")
	p, err := startLogged(cmd, fmt.Sprintf("%s.dhclient%d.log", base, h.clientNo))
	if err != nil {
		t.Fatalf("start dhclient in %s: %v", h.ns.Name, err)
	}
	h.client = p
}

// waitLease waits until h's reserved address is on its eth0.
func (l *LAN) waitLease(h *lanHost) {
	l.t.Helper()
	Eventually(l.t, time.Minute, 50*time.Millisecond, fmt.Sprintf("DHCP lease %s on %s's eth0", h.ip, h.ns.Name), func() (bool, string) {
		out, err := h.ns.Exec("ip", "-4", "-o", "addr", "show", "dev", "eth0").CombinedOutput()
		return err == nil && strings.Contains(string(out), " "+h.ip+"/"), string(out)
	})
}

// Log is the DHCP server's log (for a failing test).
func (l *LAN) Log() string { return tailFile(filepath.Join(l.dir, "dnsmasq.log"), 40) }
