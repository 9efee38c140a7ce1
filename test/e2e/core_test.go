package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

const (
	ext = corev1.NodeExternalIP
	in  = corev1.NodeInternalIP
	hn  = corev1.NodeHostName
)

var dedicated = corev1.Taint{Key: "example.com/dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}

// Scenario 1: a fresh Node gets its addresses and loses only the uninitialized taint.
func TestFreshNodePublishedAndOnlyUninitializedTaintRemoved(t *testing.T) {
	e := newEnv(t, "fresh")
	e.cp.CreateNode(t, harness.NodeSpec{Name: e.node, Taints: []corev1.Taint{harness.Uninitialized, dedicated},
		Addresses: []corev1.NodeAddress{harness.Addr(hn, "fresh")}})
	e.uplink("eth0", "192.0.2.10/24", "192.0.2.1", 100)
	e.uplink6("eth0", "2001:db8::10/64", "2001:db8::1", 100)
	e.start()

	n := e.cp.WaitNode(t, e.node, 30*time.Second, "uninitialized taint removed", func(n *corev1.Node) bool {
		return !harness.HasTaint(n, harness.Uninitialized.Key)
	})
	// The defaults: an InternalIP per family; the ExternalIPs equal them and are not published.
	want := []corev1.NodeAddress{harness.Addr(in, "192.0.2.10"), harness.Addr(in, "2001:db8::10"), harness.Addr(hn, "fresh")}
	if got := n.Status.Addresses; harness.FormatAddrs(got) != harness.FormatAddrs(want) {
		t.Fatalf("addresses = %s, want %s", harness.FormatAddrs(got), harness.FormatAddrs(want))
	}
	// The API server adds node.kubernetes.io/not-ready at creation; it and the foreign taint stay.
	if got := strings.Join(harness.TaintKeys(n), ","); got != "example.com/dedicated,node.kubernetes.io/not-ready" {
		t.Fatalf("taints = %s, want example.com/dedicated,node.kubernetes.io/not-ready", got)
	}
	if w := e.cp.Writes(t, e.node); w["status"] != 1 || w[""] != 1 {
		t.Fatalf("agent writes = %v, want one status write and one taint write", w)
	}
	// The event recorder sends asynchronously: wait for the events, then check there is one each.
	e.cp.WaitEvents(t, e.node, "AddressesUpdated", 1, 10*time.Second)
	e.cp.WaitEvents(t, e.node, "TaintRemoved", 1, 10*time.Second)
}

// Scenario 2: renumbering the uplink, make-before-break and break-before-make, is one write each and
// never an empty or intermediate list.
func TestRenumberIsOneWrite(t *testing.T) {
	e := newEnv(t, "renumber")
	a := e.startRenumbering()
	if w := e.statusWrites(); w != 1 {
		t.Fatalf("status writes after start = %d, want 1", w)
	}

	t.Run("make-before-break", func(t *testing.T) {
		e.renumberMakeBeforeBreak("192.0.2.10", "192.0.2.20")
		e.waitAddresses([]corev1.NodeAddress{harness.Addr(ext, "192.0.2.20"), harness.Addr(hn, "renumber")})
		if w := e.statusWrites(); w != 2 {
			t.Fatalf("status writes = %d, want 2", w)
		}
	})
	t.Run("break-before-make", func(t *testing.T) {
		e.renumberBreakBeforeMake("192.0.2.20", "192.0.2.30")
		e.waitAddresses([]corev1.NodeAddress{harness.Addr(ext, "192.0.2.30"), harness.Addr(hn, "renumber")})
		if w := e.statusWrites(); w != 3 {
			t.Fatalf("status writes = %d, want 3 (no empty or intermediate list)", w)
		}
	})
	if r := a.Metric(`nodeaddr_node_writes_total{kind="addresses",result="success"}`); r != 3 {
		t.Fatalf("nodeaddr_node_writes_total success = %v, want 3", r)
	}
}

// startRenumbering is the renumbering scenarios' world: the Node with its Hostname, eth0 with
// 192.0.2.10/24 and a default route, and the agent publishing that address as the ExternalIP.
func (e *env) startRenumbering() *harness.Agent {
	e.t.Helper()
	e.cp.CreateNode(e.t, harness.NodeSpec{Name: e.node, Addresses: []corev1.NodeAddress{harness.Addr(hn, e.node)}})
	e.uplink("eth0", "192.0.2.10/24", "192.0.2.1", 100)
	a := e.start("--internal-ip-target=none", "--external-ip-target=8.8.8.8")
	e.waitAddresses([]corev1.NodeAddress{harness.Addr(ext, "192.0.2.10"), harness.Addr(hn, e.node)})
	return a
}

// renumberMakeBeforeBreak adds to (a /24 on eth0) and then deletes from: with promote_secondaries
// the new address takes over when the old one goes.
func (e *env) renumberMakeBeforeBreak(from, to string) {
	e.t.Helper()
	e.ns.IP("addr", "add", to+"/24", "dev", "eth0")
	e.ns.IP("addr", "del", from+"/24", "dev", "eth0")
}

// renumberBreakBeforeMake is a DHCP client's renumbering: it deletes the old lease's address (and
// with it the routes), waits, then adds the new one and its default route. The pause is longer than
// debounce + max delay, so the agent really resolves "no address" in between; the hold-down keeps
// the old one.
func (e *env) renumberBreakBeforeMake(from, to string) {
	e.t.Helper()
	e.ns.IP("addr", "del", from+"/24", "dev", "eth0")
	time.Sleep(1500 * time.Millisecond) // kernel interval: the lease gone, longer than debounce + max delay
	e.ns.IP("addr", "add", to+"/24", "dev", "eth0")
	e.ns.IP("route", "replace", "default", "via", "192.0.2.1", "dev", "eth0", "metric", "100")
}

// Scenario 3: the primary uplink going administratively down moves ExternalIP to the secondary.
func TestFailoverToSecondaryUplink(t *testing.T) {
	e := newEnv(t, "failover")
	e.cp.CreateNode(t, harness.NodeSpec{Name: e.node})
	e.uplink("eth0", "192.0.2.10/24", "192.0.2.1", 100)
	e.uplink("eth1", "198.51.100.10/24", "198.51.100.1", 200)
	e.start("--internal-ip-target=none", "--external-ip-target=8.8.8.8")
	e.waitAddresses([]corev1.NodeAddress{harness.Addr(ext, "192.0.2.10")})

	e.ns.IP("link", "set", "eth0", "down") // its routes vanish
	e.waitAddresses([]corev1.NodeAddress{harness.Addr(ext, "198.51.100.10")})

	e.ns.IP("link", "set", "eth0", "up") // a network manager restores the route
	e.ns.IP("route", "replace", "default", "via", "192.0.2.1", "dev", "eth0", "metric", "100")
	e.waitAddresses([]corev1.NodeAddress{harness.Addr(ext, "192.0.2.10")})
	if w := e.statusWrites(); w != 3 {
		t.Fatalf("status writes = %d, want 3", w)
	}
}

// Scenario 4: dual-stack targets, kubelet entries preserved, IPv6-primary order kept.
func TestDualStack(t *testing.T) {
	t.Run("kubelet InternalIPs and Hostname preserved", func(t *testing.T) {
		e := newEnv(t, "dual")
		kubelet := []corev1.NodeAddress{harness.Addr(in, "10.0.0.5"), harness.Addr(in, "fd00::5"), harness.Addr(hn, "dual")}
		e.cp.CreateNode(t, harness.NodeSpec{Name: e.node, Addresses: kubelet})
		e.uplink("eth0", "192.0.2.10/24", "192.0.2.1", 100)
		e.uplink6("eth0", "2001:db8::10/64", "2001:db8::1", 100)
		e.start("--internal-ip-target=none")
		e.waitAddresses([]corev1.NodeAddress{harness.Addr(in, "10.0.0.5"), harness.Addr(in, "fd00::5"),
			harness.Addr(ext, "192.0.2.10"), harness.Addr(ext, "2001:db8::10"), harness.Addr(hn, "dual")})
	})
	t.Run("IPv6-primary node keeps IPv6 first", func(t *testing.T) {
		e := newEnv(t, "v6primary")
		e.cp.CreateNode(t, harness.NodeSpec{Name: e.node,
			Addresses: []corev1.NodeAddress{harness.Addr(in, "fd00::5"), harness.Addr(in, "10.0.0.5"), harness.Addr(hn, "v6primary")}})
		e.uplink("eth0", "192.0.2.10/24", "192.0.2.1", 100)
		e.uplink6("eth0", "2001:db8::10/64", "2001:db8::1", 100)
		e.start("--internal-ip-target=192.0.2.1,2001:db8::1", "--external-ip-target=none")
		e.waitAddresses([]corev1.NodeAddress{harness.Addr(in, "2001:db8::10"), harness.Addr(in, "192.0.2.10"), harness.Addr(hn, "v6primary")})
	})
}

// Scenario 5: an idle agent makes no writes and no GET or LIST; only its watch stays open.
func TestIdleCostsNothing(t *testing.T) {
	e := newEnv(t, "idle")
	e.cp.CreateNode(t, harness.NodeSpec{Name: e.node, Taints: []corev1.Taint{harness.Uninitialized}})
	e.uplink("eth0", "192.0.2.10/24", "192.0.2.1", 100)
	a := e.start("--resync-interval=2s")
	e.cp.WaitNode(t, e.node, 30*time.Second, "initialized", func(n *corev1.Node) bool {
		return !harness.HasTaint(n, harness.Uninitialized.Key) && len(n.Status.Addresses) == 1
	})
	before := countVerbs(t, e.cp)
	time.Sleep(30 * time.Second) // measured window: 30 s of idling with 15 resyncs
	after := countVerbs(t, e.cp)
	for _, verb := range []string{"get", "list", "patch", "update", "create"} {
		if after[verb] != before[verb] {
			t.Errorf("agent %s requests while idle: %d (before %v, after %v)", verb, after[verb]-before[verb], before, after)
		}
	}
	if v := a.Metric(`nodeaddr_last_resync_timestamp_seconds`); v == 0 {
		t.Errorf("no resync happened during the idle period")
	}
}

func countVerbs(t *testing.T, cp *harness.ControlPlane) map[string]int {
	t.Helper()
	evs, err := cp.Audit(harness.AgentUser)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, e := range evs {
		if e.Verb == "create" && e.ObjectRef != nil && e.ObjectRef.Resource == "events" {
			out["event"]++ // events are counted apart: the agent records none while idle either
			continue
		}
		out[e.Verb]++
	}
	return out
}

// Scenario 6: --run-once, an agent restart with nothing to do, and a bad kubeconfig.
func TestRunOnceRestartAndBadKubeconfig(t *testing.T) {
	e := newEnv(t, "once")
	e.cp.CreateNode(t, harness.NodeSpec{Name: e.node, Taints: []corev1.Taint{harness.Uninitialized}})
	e.uplink("eth0", "192.0.2.10/24", "192.0.2.1", 100)

	code, _ := harness.RunAgent(t, e.ns, harness.AgentOptions{Kubeconfig: e.kc,
		Args: []string{"--node-name=" + e.node, "--run-once", "--internal-ip-target=none", "--external-ip-target=8.8.8.8"}}, 60*time.Second)
	if code != 0 {
		t.Fatalf("--run-once exit code = %d, want 0", code)
	}
	n := e.cp.Node(t, e.node)
	if harness.FormatAddrs(n.Status.Addresses) != "[ExternalIP=192.0.2.10]" || harness.HasTaint(n, harness.Uninitialized.Key) {
		t.Fatalf("after --run-once: addresses %s taints %v", harness.FormatAddrs(n.Status.Addresses), harness.TaintKeys(n))
	}
	writes := e.cp.Writes(t, e.node)

	a := e.start("--internal-ip-target=none", "--external-ip-target=8.8.8.8")
	waitReady(t, a)
	time.Sleep(2 * time.Second) // measured window: a wrong agent would write by now
	if got := e.cp.Writes(t, e.node); got["status"] != writes["status"] || got[""] != writes[""] {
		t.Fatalf("restart with a correct Node wrote: before %v after %v", writes, got)
	}

	bad := harness.Kubeconfig(t, harness.AgentDir(t), "https://127.0.0.1:1", "x")
	if err := writeFile(bad, "this: is: not a kubeconfig"); err != nil {
		t.Fatal(err)
	}
	code, out := harness.RunAgent(t, e.ns, harness.AgentOptions{Kubeconfig: bad,
		Args: []string{"--node-name=" + e.node, "--run-once"}}, 30*time.Second)
	if code != 1 || !strings.Contains(out, "kubeconfig "+bad) {
		t.Fatalf("bad kubeconfig: exit %d, output %q; want exit 1 naming the kubeconfig", code, out)
	}
	// A missing Node is retried until --timeout (the kubelet may not have registered it yet): 5 s, so
	// that a first GET slowed by a loaded machine still gets its NotFound before the deadline.
	code, out = harness.RunAgent(t, e.ns, harness.AgentOptions{Kubeconfig: e.kc,
		Args: []string{"--node-name=missing-node", "--run-once", "--timeout=5s"}}, 30*time.Second)
	if code != 1 || !strings.Contains(out, `node \"missing-node\" not found`) && !strings.Contains(out, `node "missing-node" not found`) {
		t.Fatalf("missing node: exit %d, output %q; want exit 1 saying it is not found", code, out)
	}
}

func waitReady(t *testing.T, a *harness.Agent) {
	t.Helper()
	harness.Eventually(t, 30*time.Second, 50*time.Millisecond, "agent ready", func() (bool, string) {
		code, _, err := a.Get(a.ProbePort, "/readyz")
		return err == nil && code == 200, fmt.Sprintf("/readyz %d %v", code, err)
	})
}

// Scenario 7: a Node created after the agent started is published once it appears.
func TestNodeCreatedAfterStart(t *testing.T) {
	e := newEnv(t, "late")
	e.uplink("eth0", "192.0.2.10/24", "192.0.2.1", 100)
	a := e.start("--internal-ip-target=none", "--external-ip-target=8.8.8.8")
	harness.Eventually(t, 20*time.Second, 50*time.Millisecond, "agent reports the missing node", func() (bool, string) {
		logs := a.Logs()
		return strings.Contains(logs, "waiting for it to be created"), "log tail: " + lastLine(logs)
	})
	e.cp.CreateNode(t, harness.NodeSpec{Name: e.node, Taints: []corev1.Taint{harness.Uninitialized}})
	n := e.cp.WaitNode(t, e.node, 30*time.Second, "initialized", func(n *corev1.Node) bool {
		return !harness.HasTaint(n, harness.Uninitialized.Key)
	})
	if harness.FormatAddrs(n.Status.Addresses) != "[ExternalIP=192.0.2.10]" {
		t.Fatalf("addresses = %s", harness.FormatAddrs(n.Status.Addresses))
	}
}

// Scenario 8: a concurrent writer edits labels, annotations, conditions and its own address entry
// while the agent renumbers. Nothing is lost on either side, and conflicts really happened.
func TestConcurrentWriterLosesNothing(t *testing.T) {
	e := newEnv(t, "concurrent")
	e.cp.CreateNode(t, harness.NodeSpec{Name: e.node, Addresses: []corev1.NodeAddress{harness.Addr(hn, "concurrent")}})
	e.uplink("eth0", "192.0.2.10/24", "192.0.2.1", 100)
	a := e.start("--internal-ip-target=none", "--external-ip-target=8.8.8.8", "--debounce=0", "--publish-rate=100", "--publish-burst=100")
	e.waitAddresses([]corev1.NodeAddress{harness.Addr(ext, "192.0.2.10"), harness.Addr(hn, "concurrent")})

	ctx, cancel := context.WithCancel(context.Background())
	w := &writer{cs: e.cp.Admin, node: e.node}
	done := make(chan struct{})
	go func() { defer close(done); w.run(ctx) }()

	ip := 10
	for round := 0; round < 20; round++ {
		next := ip + 1
		e.ns.IP("addr", "add", "192.0.2."+itoa(next)+"/24", "dev", "eth0")
		e.ns.IP("addr", "del", "192.0.2."+itoa(ip)+"/24", "dev", "eth0")
		ip = next
		time.Sleep(300 * time.Millisecond) // kernel interval: the renumberings' pace
		if round >= 4 && a.Metric(`nodeaddr_node_writes_total{kind="addresses",result="conflict"}`) > 0 {
			break
		}
	}
	cancel()
	<-done
	if c := a.Metric(`nodeaddr_node_writes_total{kind="addresses",result="conflict"}`); c == 0 {
		t.Fatalf("no conflict occurred: the test did not exercise the precondition (writer ops %d)", w.ops.Load())
	}
	want := []corev1.NodeAddress{harness.Addr(ext, "192.0.2."+itoa(ip)), harness.Addr(hn, "concurrent")}
	if w.dns {
		want = append(want, harness.Addr(corev1.NodeInternalDNS, "concurrent.example"))
	}
	n := e.waitAddresses(want)
	w.check(t, n)
}
