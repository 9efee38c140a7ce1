package e2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// cpuSeconds returns the user+system CPU time of pid.
func cpuSeconds(t *testing.T, pid int) float64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// Fields after the command name (which may contain spaces) start after the last ')'.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100 // USER_HZ
}

func probe(a *harness.Agent, path string) int {
	code, _, err := a.Get(a.ProbePort, path)
	if err != nil {
		return 0
	}
	return code
}

// The API server is down for 60 s while the address changes: the agent keeps running and healthy,
// reports not-ready while the write fails, does not spin, and converges once the server is back.
func TestAPIServerOutage(t *testing.T) {
	e := newEnv(t, "outage")
	e.cp.CreateNode(t, harness.NodeSpec{Name: e.node})
	e.uplink("eth0", "192.0.2.10/24", "192.0.2.1", 100)
	a := e.start("--internal-ip-target=none", "--external-ip-target=8.8.8.8")
	e.waitAddresses([]corev1.NodeAddress{harness.Addr(ext, "192.0.2.10")})
	waitReady(t, a)

	e.cp.StopAPIServer()
	cpu0 := cpuSeconds(t, a.Pid())
	e.ns.IP("addr", "add", "192.0.2.20/24", "dev", "eth0")
	e.ns.IP("addr", "del", "192.0.2.10/24", "dev", "eth0")
	sawNotReady := false
	for end := time.Now().Add(60 * time.Second); time.Now().Before(end); time.Sleep(time.Second) { // measured window: 60 s of outage

		if c := probe(a, "/healthz"); c != 200 {
			t.Fatalf("/healthz = %d during the outage, want 200", c)
		}
		if probe(a, "/readyz") == 503 {
			sawNotReady = true
		}
	}
	cpu := cpuSeconds(t, a.Pid()) - cpu0
	if !sawNotReady {
		t.Errorf("/readyz never turned false while the needed write failed")
	}
	// A retry loop without backoff burns a core; the agent backs off to one attempt every 20 s.
	if cpu > 3 {
		t.Errorf("agent used %.2f CPU seconds during a 60 s outage: a hot loop", cpu)
	}
	t.Logf("agent CPU during the 60 s outage: %.2f s", cpu)
	m, _ := a.Metrics()
	t.Logf("failed address writes during the outage: %v", m[`nodeaddr_node_writes_total{kind="addresses",result="error"}`])

	if err := e.cp.StartAPIServer(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.cp.WaitNode(t, e.node, 90*time.Second, "converged after the outage", func(n *corev1.Node) bool {
		return harness.FormatAddrs(n.Status.Addresses) == "[ExternalIP=192.0.2.20]"
	})
	harness.Eventually(t, 30*time.Second, 100*time.Millisecond, "/readyz recovers", func() (bool, string) {
		c := probe(a, "/readyz")
		return c == 200, fmt.Sprintf("/readyz %d", c)
	})
}

// etcd and then the API server restart; the agent reconnects and follows later changes.
func TestControlPlaneRestarts(t *testing.T) {
	e := newEnv(t, "restarts")
	e.cp.CreateNode(t, harness.NodeSpec{Name: e.node})
	e.uplink("eth0", "192.0.2.10/24", "192.0.2.1", 100)
	e.start("--internal-ip-target=none", "--external-ip-target=8.8.8.8")
	e.waitAddresses([]corev1.NodeAddress{harness.Addr(ext, "192.0.2.10")})

	e.cp.StopEtcd()
	time.Sleep(2 * time.Second) // measured window: etcd down for 2 s
	if err := e.cp.StartEtcd(); err != nil {
		t.Fatal(err)
	}
	e.ns.IP("addr", "add", "192.0.2.20/24", "dev", "eth0")
	e.ns.IP("addr", "del", "192.0.2.10/24", "dev", "eth0")
	e.cp.WaitNode(t, e.node, 60*time.Second, "converged after etcd restart", func(n *corev1.Node) bool {
		return harness.FormatAddrs(n.Status.Addresses) == "[ExternalIP=192.0.2.20]"
	})

	e.cp.StopAPIServer()
	if err := e.cp.StartAPIServer(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.ns.IP("addr", "add", "192.0.2.30/24", "dev", "eth0")
	e.ns.IP("addr", "del", "192.0.2.20/24", "dev", "eth0")
	e.cp.WaitNode(t, e.node, 60*time.Second, "converged after API server restart", func(n *corev1.Node) bool {
		return harness.FormatAddrs(n.Status.Addresses) == "[ExternalIP=192.0.2.30]"
	})
}

// A Node deleted and created again is republished and initialized again.
func TestNodeDeletedAndRecreated(t *testing.T) {
	e := newEnv(t, "recreate")
	e.cp.CreateNode(t, harness.NodeSpec{Name: e.node, Taints: []corev1.Taint{harness.Uninitialized}})
	e.uplink("eth0", "192.0.2.10/24", "192.0.2.1", 100)
	e.start("--internal-ip-target=none", "--external-ip-target=8.8.8.8")
	e.cp.WaitNode(t, e.node, 30*time.Second, "initialized", func(n *corev1.Node) bool {
		return !harness.HasTaint(n, harness.Uninitialized.Key) && len(n.Status.Addresses) == 1
	})
	if err := e.cp.Admin.CoreV1().Nodes().Delete(context.Background(), e.node, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // measured window: the Node absent for half a second
	e.cp.CreateNode(t, harness.NodeSpec{Name: e.node, Taints: []corev1.Taint{harness.Uninitialized}})
	n := e.cp.WaitNode(t, e.node, 30*time.Second, "initialized again", func(n *corev1.Node) bool {
		return !harness.HasTaint(n, harness.Uninitialized.Key) && len(n.Status.Addresses) == 1
	})
	if harness.FormatAddrs(n.Status.Addresses) != "[ExternalIP=192.0.2.10]" {
		t.Fatalf("addresses = %s", harness.FormatAddrs(n.Status.Addresses))
	}
}

// The uplink's carrier flaps 50 times in 5 s. With ignore_routes_with_linkdown the route vanishes on
// every flap, yet the hold-down keeps the Node exact: no write at all after the first.
func TestLinkFlapWritesNothing(t *testing.T) {
	e := newEnv(t, "flap")
	a := e.startCarrierFlap()
	before := a.Metric(`nodeaddr_resolutions_total{result="success"}`)

	e.flapCarrier()
	time.Sleep(7 * time.Second) // measured window: longer than the removal grace, a wrong agent would write now
	if n := e.cp.Node(t, e.node); harness.FormatAddrs(n.Status.Addresses) != "[ExternalIP=192.0.2.10]" {
		t.Fatalf("addresses after flapping = %s", harness.FormatAddrs(n.Status.Addresses))
	}
	if w := e.statusWrites(); w != 1 {
		t.Fatalf("status writes = %d, want 1 (the initial one)", w)
	}
	if after := a.Metric(`nodeaddr_resolutions_total{result="success"}`); after <= before {
		t.Fatalf("the agent never resolved during the flapping (resolutions %v -> %v)", before, after)
	}
}

// startCarrierFlap is the flap storm's world: ignore_routes_with_linkdown, so the default route
// vanishes with eth0's carrier, and the agent publishing eth0's 192.0.2.10 as the ExternalIP.
func (e *env) startCarrierFlap() *harness.Agent {
	e.t.Helper()
	e.cp.CreateNode(e.t, harness.NodeSpec{Name: e.node})
	e.ns.Sysctl("net.ipv4.conf.all.ignore_routes_with_linkdown", "1")
	e.uplink("eth0", "192.0.2.10/24", "192.0.2.1", 100)
	e.ns.Sysctl("net.ipv4.conf.eth0.ignore_routes_with_linkdown", "1")
	a := e.start("--internal-ip-target=none", "--external-ip-target=8.8.8.8")
	e.waitAddresses([]corev1.NodeAddress{harness.Addr(ext, "192.0.2.10")})
	return a
}

// flapCarrier is the flap storm: the router's end of eth0 goes down and up 50 times in 5 s.
func (e *env) flapCarrier() {
	e.t.Helper()
	for i := 0; i < 50; i++ {
		e.router.IP("link", "set", "r-eth0", "down")
		time.Sleep(50 * time.Millisecond) // kernel interval: the carrier down 50 ms
		e.router.IP("link", "set", "r-eth0", "up")
		time.Sleep(50 * time.Millisecond) // kernel interval: and up 50 ms
	}
}

// A writer patching labels, annotations and conditions 50 times per second while the agent
// renumbers, once a second, at least 5 times and until the writer has sent 200 requests (a loaded
// machine slows the writer; the overlap is what the test needs): no field is lost on either side.
func TestBusyWriterWhileRenumbering(t *testing.T) {
	e := newEnv(t, "busy")
	e.cp.CreateNode(t, harness.NodeSpec{Name: e.node, Addresses: []corev1.NodeAddress{harness.Addr(hn, "busy")}})
	e.uplink("eth0", "192.0.2.10/24", "192.0.2.1", 100)
	e.start("--internal-ip-target=none", "--external-ip-target=8.8.8.8")
	e.waitAddresses([]corev1.NodeAddress{harness.Addr(ext, "192.0.2.10"), harness.Addr(hn, "busy")})

	stop, cancel := context.WithCancel(context.Background())
	w := &writer{cs: e.cp.Admin, node: e.node, rate: 50, noAddresses: true}
	done := make(chan struct{})
	go func() { defer close(done); w.run(stop) }()
	ip := 10
	for i := 0; i < 5 || w.ops.Load() < 200 && i < 30; i++ {
		e.ns.IP("addr", "add", "192.0.2."+itoa(ip+1)+"/24", "dev", "eth0")
		e.ns.IP("addr", "del", "192.0.2."+itoa(ip)+"/24", "dev", "eth0")
		ip++
		time.Sleep(time.Second) // kernel interval: one renumbering a second
	}
	cancel()
	<-done
	if ops := w.ops.Load(); ops < 200 {
		t.Fatalf("writer made only %d requests in %d renumberings", ops, ip-10)
	}
	n := e.waitAddresses([]corev1.NodeAddress{harness.Addr(ext, "192.0.2."+itoa(ip)), harness.Addr(hn, "busy")})
	w.check(t, n)
}

// SIGTERM while a write waits for the rate limiter: the agent exits promptly and cleanly, and the
// Node holds the last complete list.
func TestSIGTERMDuringPendingPublish(t *testing.T) {
	e := newEnv(t, "sigterm")
	e.cp.CreateNode(t, harness.NodeSpec{Name: e.node})
	e.uplink("eth0", "192.0.2.10/24", "192.0.2.1", 100)
	a := e.start("--internal-ip-target=none", "--external-ip-target=8.8.8.8", "--publish-rate=0.01", "--publish-burst=1")
	e.waitAddresses([]corev1.NodeAddress{harness.Addr(ext, "192.0.2.10")})
	e.ns.IP("addr", "add", "192.0.2.20/24", "dev", "eth0")
	e.ns.IP("addr", "del", "192.0.2.10/24", "dev", "eth0")
	harness.Eventually(t, 10*time.Second, 20*time.Millisecond, "agent sees the change (two \"desired addresses changed\")", func() (bool, string) {
		n := strings.Count(a.Logs(), "desired addresses changed")
		return n >= 2, fmt.Sprintf("%d", n)
	})
	start := time.Now()
	a.Signal(syscall.SIGTERM)
	select {
	case <-a.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("agent did not exit within 10 s of SIGTERM while a write was pending")
	}
	t.Logf("exit %s after SIGTERM", time.Since(start).Round(time.Millisecond))
	if code := a.Stop(); code != 0 {
		t.Fatalf("exit code %d, want 0", code)
	}
	if n := e.cp.Node(t, e.node); harness.FormatAddrs(n.Status.Addresses) != "[ExternalIP=192.0.2.10]" {
		t.Fatalf("addresses = %s, want the last complete list", harness.FormatAddrs(n.Status.Addresses))
	}
	if w := e.statusWrites(); w != 1 {
		t.Fatalf("status writes = %d, want 1", w)
	}
}

// 200 000 route additions and removals overflow the subscription; the agent resubscribes without
// re-dumping the table, stays small, and the final state is exact.
func TestKernelRouteFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	e := newEnv(t, "flood")
	a := e.startRouteFlood()
	e.routeFlood(a, "192.0.2.10", "192.0.2.20")
	e.waitAddresses([]corev1.NodeAddress{harness.Addr(ext, "192.0.2.20")})
	m, err := a.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	rss := m["process_resident_memory_bytes"]
	t.Logf("route events %v, resubscriptions %v, RSS %.1f MiB", m[`nodeaddr_netlink_events_total{kind="route"}`],
		m[`nodeaddr_netlink_resubscriptions_total{subscription="route"}`], rss/(1<<20))
	if m[`nodeaddr_netlink_resubscriptions_total{subscription="route"}`] == 0 {
		t.Fatalf("the route subscription never overflowed: the test did not exercise resubscription")
	}
	// A resubscription that re-dumped the table would count up to 100 000 extra route events.
	if ev := m[`nodeaddr_netlink_events_total{kind="route"}`]; ev > 200010 {
		t.Fatalf("%v route events for 200 000 changes: the table was dumped again", ev)
	}
	if rss > 96<<20 {
		t.Fatalf("RSS %.1f MiB after the flood: memory is not bounded", rss/(1<<20))
	}
	if w := e.statusWrites(); w != 2 {
		t.Fatalf("status writes = %d, want 2", w)
	}
	waitHealthy(t, a) // every subscription is back
}

// startRouteFlood is the route flood's world: eth0 with 192.0.2.10/24, and the agent publishing it
// as the ExternalIP with a 64 KiB netlink buffer (a host whose net.core.rmem_max caps the 4 MiB
// request).
func (e *env) startRouteFlood() *harness.Agent {
	e.t.Helper()
	e.cp.CreateNode(e.t, harness.NodeSpec{Name: e.node})
	e.uplink("eth0", "192.0.2.10/24", "192.0.2.1", 100)
	a := e.start("--internal-ip-target=none", "--external-ip-target=8.8.8.8", "--netlink-receive-buffer=65536")
	e.waitAddresses([]corev1.NodeAddress{harness.Addr(ext, "192.0.2.10")})
	return a
}

// routeFlood adds 100 000 routes with the agent frozen (descheduled on a busy host), renumbers eth0
// from the /24 from to the /24 to, thaws the agent and deletes the routes: the kernel must drop and
// report ENOBUFS. A reader that keeps up on a fast machine would otherwise never overflow (CI saw
// exactly that). It returns when the agent was thawed, right after the renumbering.
func (e *env) routeFlood(a *harness.Agent, from, to string) (thawed time.Time) {
	e.t.Helper()
	add, del := harness.RouteBatch(100000, "192.0.2.1", "eth0")
	a.Signal(syscall.SIGSTOP)
	defer a.Signal(syscall.SIGCONT) // also when a step below fails
	e.ns.Batch(add)
	e.ns.IP("addr", "add", to+"/24", "dev", "eth0")
	e.ns.IP("addr", "del", from+"/24", "dev", "eth0")
	a.Signal(syscall.SIGCONT)
	thawed = time.Now()
	e.ns.Batch(del)
	return thawed
}
