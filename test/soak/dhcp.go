package soak

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// The DHCP uplink: eth2 (100.64.0.0/24, an ISP's carrier-grade NAT range) gets its address from
// dnsmasq in the router's namespace through ISC dhclient, with a default route of metric 300 (the
// last resort, used when eth0 and eth1 have none). The oracle knows nothing of it: it reads the
// address and the routes from the kernel like every other.
var dhcpUplink = uplink{dev: "eth2", prefix: "100.64.0.", gw: "100.64.0.1", metric: 300}

// dhcp runs the server and the client of the DHCP uplink.
type dhcp struct {
	s                  *soak
	dnsmasq, dhclient  string
	dir, mac, reserved string
	server, client     *daemon
}

// startDHCP adds the DHCP uplink and waits for its first lease.
func (s *soak) startDHCP() {
	t := s.t
	d := &dhcp{s: s, dnsmasq: harness.Tool(t, "dnsmasq", "dnsmasq-base"),
		dhclient: harness.Tool(t, "dhclient", "isc-dhcp-client"), dir: t.TempDir()}
	u := dhcpUplink
	s.w.ns.Link(u.dev, s.w.rtr, "r-"+u.dev)
	s.w.rtr.IP("addr", "add", u.gw+"/24", "dev", "r-"+u.dev)
	out, err := s.w.ns.Exec("cat", "/sys/class/net/"+u.dev+"/address").Output()
	if err != nil {
		t.Fatalf("%s's MAC: %v", u.dev, err)
	}
	d.mac = strings.TrimSpace(string(out))
	if err := os.WriteFile(filepath.Join(d.dir, "dhclient-script"), []byte(harness.DHCPClientScript(fmt.Sprint(dhcpUplink.metric))), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.server.kill(); d.client.kill() })
	d.serve(s.freeHost(s.rng, u))
	d.startClient()
	if !d.waitLease(30 * time.Second) {
		t.Fatalf("no DHCP lease %s on %s within 30 s", d.reserved, u.dev)
	}
	s.dhcp = d
	s.rec.event("dhcp", "%s leased %s", u.dev, d.reserved)
}

// serve starts dnsmasq with a fresh lease database and ip reserved for the node's MAC.
func (d *dhcp) serve(ip string) {
	os.Remove(filepath.Join(d.dir, "dnsmasq.leases"))
	d.reserved = ip
	d.server = background("dnsmasq", d.s.w.rtr.Exec(d.dnsmasq, "--no-daemon", "--conf-file=/dev/null",
		"--port=0", "--interface=r-"+dhcpUplink.dev, "--bind-interfaces", "--dhcp-authoritative",
		"--dhcp-range=100.64.0.100,100.64.0.200,255.255.255.0,2m",
		"--dhcp-host="+d.mac+","+ip, "--dhcp-option=option:router,"+dhcpUplink.gw,
		"--dhcp-leasefile="+filepath.Join(d.dir, "dnsmasq.leases"),
		"--pid-file="+filepath.Join(d.dir, "dnsmasq.pid")))
}

func (d *dhcp) startClient() {
	cmd := d.s.w.ns.Exec(d.dhclient, "-d", "-4", "-sf",
		filepath.Join(d.dir, "dhclient-script"), "-lf", filepath.Join(d.dir, "dhclient.leases"),
		"-pf", filepath.Join(d.dir, "dhclient.pid"), dhcpUplink.dev)
	d.client = background("dhclient", cmd)
}

// waitLease waits until the reserved address is on the uplink, sampling the kernel into the
// timeline every 100 ms.
func (d *dhcp) waitLease(timeout time.Duration) bool {
	return harness.Poll(timeout, 100*time.Millisecond, "DHCP lease "+d.reserved, func() (bool, string) {
		k := readKernel(d.s.w.ns.Name)
		d.s.timeline.add(k)
		for _, a := range k.Addrs {
			if a.Dev == dhcpUplink.dev && a.Local == d.reserved {
				return true, ""
			}
		}
		return false, fmt.Sprint(k.Addrs)
	}) == nil
}

// dhcpLease changes the lease: dnsmasq restarts with a new reservation (or, one time in four, the
// same one), and the client restarts (as after a reboot or a forced renewal): it asks for its old
// address, is refused, and binds the new one, flushing the old address first.
func dhcpLease(s *soak, r *rand.Rand, _ uplink) {
	d := s.dhcp
	if d == nil {
		return
	}
	next := d.reserved
	if r.IntN(4) != 0 {
		next = s.freeHost(r, dhcpUplink)
	}
	d.change(next, dur(r, 0, 2*time.Second))
}

// change restarts dnsmasq with next reserved, and dhclient after pause.
func (d *dhcp) change(next string, pause time.Duration) {
	old := d.reserved
	d.server.kill()
	d.serve(next)
	time.Sleep(pause) // fault window: the client restarts this long after the server
	d.client.kill()
	d.startClient()
	ok := d.waitLease(30 * time.Second)
	d.s.rec.event("dhcp", "%s lease %s -> %s (bound: %v)", dhcpUplink.dev, old, next, ok)
	if !ok {
		fmt.Printf("soak: DHCP lease %s not bound within 30 s\n", next)
	}
}

// daemon is a background process group (dhclient runs its hook in children).
type daemon struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func background(name string, cmd *exec.Cmd) *daemon {
	// Killed with the test process too (a timeout or a kill leaves no DHCP daemon behind).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = time.Second
	d := &daemon{cmd: cmd, done: make(chan struct{})}
	if err := harness.Spawn(cmd); err != nil {
		fmt.Printf("soak: start %s: %v\n", name, err)
		close(d.done)
		return d
	}
	go func() { cmd.Wait(); close(d.done) }()
	return d
}

// kill ends the whole process group and waits for the leader.
func (d *daemon) kill() {
	if d == nil || d.cmd.Process == nil {
		return
	}
	syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
	<-d.done
}
