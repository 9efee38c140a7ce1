package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// requireTool skips (or, under NODEADDR_E2E=require, fails) when a Debian tool is missing.
func requireTool(t *testing.T, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		for _, dir := range []string{"/usr/sbin", "/sbin"} {
			if _, serr := os.Stat(filepath.Join(dir, name)); serr == nil {
				return filepath.Join(dir, name)
			}
		}
		if os.Getenv("NODEADDR_E2E") == "require" {
			t.Fatalf("%s not found (NODEADDR_E2E=require; .ci/run installs Debian's %s)", name, pkg)
		}
		t.Skipf("SKIPPING: %s not found: install Debian's %s", name, pkg)
	}
	return p
}

// background starts cmd and stops it when t ends; its output goes to the test log on failure.
func background(t *testing.T, name string, cmd *exec.Cmd) *exec.Cmd {
	t.Helper()
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &lockedWriter{b: &out}, &lockedWriter{b: &out}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("%s output:\n%s", name, out.String())
		}
	})
	return cmd
}

// dhcpScript is the client's hook: like Debian's dhclient-script it flushes the old lease's
// address before adding the new one (break-before-make), and it never touches /etc/resolv.conf.
const dhcpScript = `#!/bin/sh
case "$reason" in
PREINIT) ip link set dev "$interface" up ;;
BOUND|RENEW|REBIND|REBOOT)
  if [ "$old_ip_address" != "$new_ip_address" ] || [ "$reason" = BOUND ] || [ "$reason" = REBOOT ]; then
    ip -4 addr flush dev "$interface"
    ip addr add "$new_ip_address/$new_subnet_mask" dev "$interface"
  fi
  for r in $new_routers; do ip route replace default via "$r" dev "$interface"; break; done ;;
EXPIRE|FAIL|RELEASE|STOP) ip -4 addr flush dev "$interface" ;;
esac
exit 0
`

// A real DHCP client renumbered by a real DHCP server: the Node ends with the new address, and the
// agent never wrote an empty or intermediate list.
func TestDHCPRenumbering(t *testing.T) {
	dnsmasq := requireTool(t, "dnsmasq", "dnsmasq-base")
	dhclient := requireTool(t, "dhclient", "isc-dhcp-client")
	e := newEnv(t, "dhcp")
	e.cp.CreateNode(t, harness.NodeSpec{Name: e.node, Addresses: []corev1.NodeAddress{addr(hn, "dhcp")}})
	e.ns.Link("eth0", e.router, "r-eth0")
	e.router.IP("addr", "add", "192.0.2.1/24", "dev", "r-eth0")
	mac := linkMAC(t, e.ns, "eth0")

	dir := harness.AgentDir(t)
	script := filepath.Join(dir, "dhclient-script")
	if err := os.WriteFile(script, []byte(dhcpScript), 0o755); err != nil {
		t.Fatal(err)
	}
	serve := func(ip string) *exec.Cmd {
		return background(t, "dnsmasq", e.router.Exec(dnsmasq, "--no-daemon", "--conf-file=/dev/null",
			"--port=0", "--interface=r-eth0", "--bind-interfaces", "--dhcp-authoritative",
			"--dhcp-range=192.0.2.100,192.0.2.200,255.255.255.0,2m",
			"--dhcp-host="+mac+","+ip, "--dhcp-option=option:router,192.0.2.1",
			"--dhcp-leasefile="+filepath.Join(dir, "dnsmasq.leases"), "--pid-file="+filepath.Join(dir, "dnsmasq.pid"),
			"--log-dhcp"))
	}
	client := func() *exec.Cmd {
		return background(t, "dhclient", e.ns.Exec(dhclient, "-d", "-v", "-4", "-sf", script,
			"-lf", filepath.Join(dir, "dhclient.leases"), "-pf", filepath.Join(dir, "dhclient.pid"), "eth0"))
	}
	srv := serve("192.0.2.50")
	cl := client()
	e.start("--external-ip-target=8.8.8.8")
	e.waitAddresses([]corev1.NodeAddress{addr(ext, "192.0.2.50"), addr(hn, "dhcp")})

	// New reservation; the client restarts (as after a reboot or a forced renewal): it asks for its
	// old address, is refused, and binds the new one, flushing the old address first.
	srv.Process.Kill()
	srv.Wait()
	os.Remove(filepath.Join(dir, "dnsmasq.leases"))
	serve("192.0.2.60")
	cl.Process.Kill()
	cl.Wait()
	client()
	e.cp.WaitNode(t, e.node, 60*time.Second, "renumbered by DHCP", func(n *corev1.Node) bool {
		return format(n.Status.Addresses) == format([]corev1.NodeAddress{addr(ext, "192.0.2.60"), addr(hn, "dhcp")})
	})
	if w := e.statusWrites(); w != 2 {
		t.Fatalf("status writes = %d, want 2: the first lease and the new one, nothing in between", w)
	}
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

// keepalived VRRP between two routers: the node's second uplink gateway fails over; ExternalIP
// follows the node's routes, and the VIP moving around does not touch the Node.
func TestVRRPFailover(t *testing.T) {
	keepalived := requireTool(t, "keepalived", "keepalived")
	e := newEnv(t, "vrrp")
	e.cp.CreateNode(t, harness.NodeSpec{Name: e.node})
	// Two routers on one LAN bridge with the node. The routers run VRRP for the gateway VIP
	// 192.0.2.1; the node's default route points at the VIP.
	lan := harness.NewNetns(t, "lan")
	lan.IP("link", "add", "br0", "type", "bridge")
	lan.IP("link", "set", "br0", "up")
	r2 := harness.NewNetns(t, "rtr2")
	e.ns.Link("eth0", lan, "p-node")
	e.router.Link("lan0", lan, "p-r1")
	r2.Link("lan0", lan, "p-r2")
	for _, p := range []string{"p-node", "p-r1", "p-r2"} {
		lan.IP("link", "set", p, "master", "br0")
	}
	e.router.IP("addr", "add", "192.0.2.2/24", "dev", "lan0")
	r2.IP("addr", "add", "192.0.2.3/24", "dev", "lan0")
	e.ns.IP("addr", "add", "192.0.2.10/24", "dev", "eth0")
	e.ns.IP("route", "add", "default", "via", "192.0.2.1", "dev", "eth0")

	dir := harness.AgentDir(t)
	conf := func(name, state string, prio int) string {
		p := filepath.Join(dir, name+".conf")
		os.WriteFile(p, []byte(fmt.Sprintf(`global_defs { script_user root
  enable_script_security }
vrrp_instance gw {
  state %s
  interface lan0
  virtual_router_id 51
  priority %d
  advert_int 1
  virtual_ipaddress { 192.0.2.1/24 }
}
`, state, prio)), 0o644)
		return p
	}
	start := func(ns *harness.Netns, name, state string, prio int) *exec.Cmd {
		return background(t, "keepalived-"+name, ns.Exec(keepalived, "--dont-fork", "--log-console", "--vrrp",
			"-f", conf(name, state, prio), "-p", filepath.Join(dir, name+".pid"),
			"-r", filepath.Join(dir, name+".vrrp.pid")))
	}
	k1 := start(e.router, "r1", "MASTER", 200)
	start(r2, "r2", "BACKUP", 100)
	waitVIP(t, e.router, "192.0.2.1")

	a := e.start("--external-ip-target=8.8.8.8")
	e.waitAddresses([]corev1.NodeAddress{addr(ext, "192.0.2.10")})

	// The master dies; the backup takes the VIP. The node's address and routes do not change, so
	// the Node must not either.
	k1.Process.Kill()
	k1.Wait()
	waitVIP(t, r2, "192.0.2.1")
	time.Sleep(2 * time.Second)
	if n := e.cp.Node(t, e.node); format(n.Status.Addresses) != "[ExternalIP=192.0.2.10]" {
		t.Fatalf("addresses after VRRP failover = %s", format(n.Status.Addresses))
	}
	if w := e.statusWrites(); w != 1 {
		t.Fatalf("status writes = %d, want 1: a gateway failover is not a node address change", w)
	}
	_ = a
}

func waitVIP(t *testing.T, ns *harness.Netns, vip string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, _ := exec.Command("ip", "-n", ns.Name, "-4", "addr", "show").Output()
		if strings.Contains(string(out), " "+vip+"/") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("VIP %s never appeared in %s", vip, ns.Name)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
