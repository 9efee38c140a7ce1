package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// daemon is a background process group (keepalived forks a VRRP child; dhclient may run hooks).
type daemon struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// kill ends the whole process group and waits for the leader.
func (d *daemon) kill() {
	syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
	<-d.done
}

// stop asks the leader to exit (SIGTERM: keepalived then removes its VIPs) and waits.
func (d *daemon) stop() {
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(10 * time.Second):
	}
	d.kill()
}

// background starts cmd in its own process group and kills the group when t ends; its output goes
// to the test log on failure.
func background(t *testing.T, name string, cmd *exec.Cmd) *daemon {
	t.Helper()
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &lockedWriter{b: &out}, &lockedWriter{b: &out}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Children that inherit the output pipe must not keep Wait from returning.
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	d := &daemon{cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(d.done) }()
	t.Cleanup(func() {
		d.kill()
		if t.Failed() {
			t.Logf("%s output:\n%s", name, out.String())
		}
	})
	return d
}

// A real DHCP client renumbered by a real DHCP server: the Node ends with the new address, and the
// agent never wrote an empty or intermediate list.
func TestDHCPRenumbering(t *testing.T) {
	dnsmasq := harness.Tool(t, "dnsmasq", "dnsmasq-base")
	dhclient := harness.Tool(t, "dhclient", "isc-dhcp-client")
	e := newEnv(t, "dhcp")
	d := e.startDHCP(dnsmasq, dhclient)
	d.renew("192.0.2.60")
	e.cp.WaitNode(t, e.node, 60*time.Second, "renumbered by DHCP", func(n *corev1.Node) bool {
		return harness.FormatAddrs(n.Status.Addresses) == harness.FormatAddrs([]corev1.NodeAddress{harness.Addr(ext, "192.0.2.60"), harness.Addr(hn, "dhcp")})
	})
	if w := e.statusWrites(); w != 2 {
		t.Fatalf("status writes = %d, want 2: the first lease and the new one, nothing in between", w)
	}
}

// dhcp is the DHCP scenario's world: dnsmasq in the router namespace serving one reservation for
// eth0's MAC, dhclient with harness.DHCPClientScript on eth0.
type dhcp struct {
	e                 *env
	dir, script, mac  string
	dnsmasq, dhclient string
	srv, cl           *daemon
}

// startDHCP starts the server with the reservation 192.0.2.50, the client, and the agent, and waits
// until the Node shows the lease as its ExternalIP (beside its Hostname).
func (e *env) startDHCP(dnsmasq, dhclient string) *dhcp {
	e.t.Helper()
	e.cp.CreateNode(e.t, harness.NodeSpec{Name: e.node, Addresses: []corev1.NodeAddress{harness.Addr(hn, e.node)}})
	e.ns.Link("eth0", e.router, "r-eth0")
	e.router.IP("addr", "add", "192.0.2.1/24", "dev", "r-eth0")
	d := &dhcp{e: e, dir: harness.AgentDir(e.t), mac: linkMAC(e.t, e.ns, "eth0"), dnsmasq: dnsmasq, dhclient: dhclient}
	d.script = filepath.Join(d.dir, "dhclient-script")
	if err := os.WriteFile(d.script, []byte(harness.DHCPClientScript("")), 0o755); err != nil {
		e.t.Fatal(err)
	}
	d.srv = d.serve("192.0.2.50")
	d.cl = d.client()
	e.start("--internal-ip-target=none", "--external-ip-target=8.8.8.8")
	e.waitAddresses([]corev1.NodeAddress{harness.Addr(ext, "192.0.2.50"), harness.Addr(hn, e.node)})
	return d
}

func (d *dhcp) serve(ip string) *daemon {
	return background(d.e.t, "dnsmasq", d.e.router.Exec(d.dnsmasq, "--no-daemon", "--conf-file=/dev/null",
		"--port=0", "--interface=r-eth0", "--bind-interfaces", "--dhcp-authoritative",
		"--dhcp-range=192.0.2.100,192.0.2.200,255.255.255.0,2m",
		"--dhcp-host="+d.mac+","+ip, "--dhcp-option=option:router,192.0.2.1",
		"--dhcp-leasefile="+filepath.Join(d.dir, "dnsmasq.leases"), "--pid-file="+filepath.Join(d.dir, "dnsmasq.pid"),
		"--log-dhcp"))
}

func (d *dhcp) client() *daemon {
	return background(d.e.t, "dhclient", d.e.ns.Exec(d.dhclient, "-d", "-v", "-4", "-sf", d.script,
		"-lf", filepath.Join(d.dir, "dhclient.leases"), "-pf", filepath.Join(d.dir, "dhclient.pid"), "eth0"))
}

// renew gives eth0 a new reservation, ip, and restarts the client (as after a reboot or a forced
// renewal): it asks for its old address, is refused, and binds the new one, flushing the old
// address first.
func (d *dhcp) renew(ip string) {
	d.srv.kill()
	os.Remove(filepath.Join(d.dir, "dnsmasq.leases"))
	d.srv = d.serve(ip)
	d.cl.kill()
	d.cl = d.client()
}

func linkMAC(t *testing.T, ns *harness.Netns, dev string) string {
	t.Helper()
	out, err := exec.Command("ip", "-n", ns.Name, "-br", "link", "show", dev).Output()
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(out))
	if len(f) < 3 {
		t.Fatalf("unexpected ip -br link output %q", out)
	}
	return f[2]
}

// keepalived on the node and on a peer share a VIP (as for a control-plane endpoint). The VIP,
// a secondary address in the node's subnet, comes and goes with VRRP failovers and never changes
// the Node's addresses; neither does a failover of the gateway VIP the node routes through.
func TestVRRPFailover(t *testing.T) {
	keepalived := harness.Tool(t, "keepalived", "keepalived")
	e := newEnv(t, "vrrp")
	v := e.startVRRP(keepalived)
	before := v.a.Metric(`nodeaddr_resolutions_total{result="success"}`)

	v.failover()
	time.Sleep(2 * time.Second) // measured window: debounce and resolution would be done by now
	if n := e.cp.Node(t, e.node); harness.FormatAddrs(n.Status.Addresses) != "[ExternalIP=192.0.2.10]" {
		t.Fatalf("addresses after VRRP failovers = %s", harness.FormatAddrs(n.Status.Addresses))
	}
	if w := e.statusWrites(); w != 1 {
		t.Fatalf("status writes = %d, want 1: a VIP moving is not a node address change", w)
	}
	if after := v.a.Metric(`nodeaddr_resolutions_total{result="success"}`); after <= before {
		t.Fatalf("the agent never resolved after the VIP left (resolutions %v -> %v)", before, after)
	}
}

// vrrp is the VRRP scenario's world: the node, a peer node and two routers on one LAN bridge. The
// routers run VRRP for the gateway VIP 192.0.2.1; the node and the peer run VRRP for the service
// VIP 192.0.2.100. k1 and kn are the masters' keepalived (router 1's and the node's).
type vrrp struct {
	e          *env
	a          *harness.Agent
	keepalived string
	dir        string
	peer, r2   *harness.Netns
	k1, kn     *daemon
}

// startVRRP builds the LAN, starts the four keepalived, waits for the masters' VIPs, and starts
// the agent, which publishes the node's 192.0.2.10 as the ExternalIP.
func (e *env) startVRRP(keepalived string) *vrrp {
	e.t.Helper()
	e.cp.CreateNode(e.t, harness.NodeSpec{Name: e.node})
	lan := harness.NewNetns(e.t, "lan")
	lan.IP("link", "add", "br0", "type", "bridge")
	lan.IP("link", "set", "br0", "up")
	v := &vrrp{e: e, keepalived: keepalived, dir: harness.AgentDir(e.t),
		peer: harness.NewNetns(e.t, "peer"), r2: harness.NewNetns(e.t, "rtr2")}
	e.ns.Link("lan0", lan, "p-node")
	v.peer.Link("lan0", lan, "p-peer")
	e.router.Link("lan0", lan, "p-r1")
	v.r2.Link("lan0", lan, "p-r2")
	for _, p := range []string{"p-node", "p-peer", "p-r1", "p-r2"} {
		lan.IP("link", "set", p, "master", "br0")
	}
	e.ns.IP("addr", "add", "192.0.2.10/24", "dev", "lan0")
	v.peer.IP("addr", "add", "192.0.2.11/24", "dev", "lan0")
	e.router.IP("addr", "add", "192.0.2.2/24", "dev", "lan0")
	v.r2.IP("addr", "add", "192.0.2.3/24", "dev", "lan0")
	e.ns.IP("route", "add", "default", "via", "192.0.2.1", "dev", "lan0")

	v.k1 = v.start(e.router, "r1", 51, 200, "192.0.2.1")
	v.start(v.r2, "r2", 51, 100, "192.0.2.1")
	v.kn = v.start(e.ns, "node", 52, 200, "192.0.2.100")
	v.start(v.peer, "peer", 52, 100, "192.0.2.100")
	waitVIP(e.t, e.router, "192.0.2.1", true)
	waitVIP(e.t, e.ns, "192.0.2.100", true)

	v.a = e.start("--internal-ip-target=none", "--external-ip-target=8.8.8.8")
	e.waitAddresses([]corev1.NodeAddress{harness.Addr(ext, "192.0.2.10")})
	return v
}

// start runs keepalived in ns for one VRRP instance (named name) of priority prio.
func (v *vrrp) start(ns *harness.Netns, name string, vrid, prio int, vip string) *daemon {
	conf := filepath.Join(v.dir, name+".conf")
	os.WriteFile(conf, []byte(fmt.Sprintf(`global_defs {
  script_user root
  enable_script_security
}
vrrp_instance v%d {
  state BACKUP
  interface lan0
  virtual_router_id %d
  priority %d
  advert_int 1
  virtual_ipaddress { %s/24 }
}
`, vrid, vrid, prio, vip)), 0o644)
	return background(v.e.t, "keepalived-"+name, ns.Exec(v.keepalived, "--dont-fork", "--log-console", "--vrrp",
		"-f", conf, "-p", filepath.Join(v.dir, name+".pid"), "-r", filepath.Join(v.dir, name+".vrrp.pid"),
		"-i", name))
}

// failover: the node's keepalived stops, so the service VIP moves to the peer; then the gateway's
// master dies and the backup router takes over the gateway VIP.
func (v *vrrp) failover() {
	t := v.e.t
	t.Helper()
	v.kn.stop()
	waitVIP(t, v.e.ns, "192.0.2.100", false)
	waitVIP(t, v.peer, "192.0.2.100", true)
	v.k1.stop()
	waitVIP(t, v.r2, "192.0.2.1", true)
}

func waitVIP(t *testing.T, ns *harness.Netns, vip string, present bool) {
	t.Helper()
	harness.Eventually(t, 20*time.Second, 100*time.Millisecond, fmt.Sprintf("VIP %s present=%v in %s", vip, present, ns.Name), func() (bool, string) {
		out, _ := exec.Command("ip", "-n", ns.Name, "-4", "addr", "show").Output()
		return strings.Contains(string(out), " "+vip+"/") == present, "\n" + string(out)
	})
}
