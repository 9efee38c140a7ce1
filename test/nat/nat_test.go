// Package nat proves external-address discovery end to end with real parts: the agent runs in a
// node namespace behind a router namespace that masquerades with nftables, and asks real STUN
// servers (coturn's turnserver --stun-only) in an "internet" namespace. No packet leaves the
// test's namespaces.
package nat

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.MainE2E(m)) }

const (
	ext = corev1.NodeExternalIP
	in  = corev1.NodeInternalIP
	hn  = corev1.NodeHostName
	// interval is the test's --external-ip-discovery-interval (the default is 5m).
	interval = 2 * time.Second
)

// world is one node behind a NAT router with STUN servers 198.51.100.1, .2, ... on the internet
// side; the router maps 10.0.0.0/16 to 203.0.113.10.
type world struct {
	t       *testing.T
	h       *harness.Host
	nat     *harness.NAT
	servers []*harness.STUNServer
}

func newWorld(t *testing.T, node string, servers int) *world {
	t.Helper()
	harness.RequireNAT(t) // before the control plane starts: a missing tool skips (fails in CI) at once
	h := harness.NewHost(t, node)
	w := &world{t: t, h: h, nat: harness.NewNAT(h)}
	w.nat.NodeUplink("eth0", "10.0.1.10/24", "10.0.1.1")
	w.nat.SetSNAT(harness.SNAT{From: "10.0.0.0/16", Public: "203.0.113.10"})
	for i := range servers {
		w.servers = append(w.servers, w.nat.StartSTUN(fmt.Sprintf("198.51.100.%d", i+1)))
	}
	h.CP.CreateNode(t, harness.NodeSpec{Name: node, Addresses: []corev1.NodeAddress{{Type: hn, Address: node}}})
	return w
}

// start runs the agent with discovery against every server, a short re-check interval and the
// given flags.
func (w *world) start(args ...string) *harness.Agent {
	var urls []string
	for _, s := range w.servers {
		urls = append(urls, s.URL())
	}
	return w.h.Start(append([]string{"--external-ip-discovery=" + strings.Join(urls, ","),
		"--external-ip-discovery-interval=" + interval.String(), "--external-ip-discovery-stale-after=10m"}, args...)...)
}

func (w *world) waitAddresses(timeout time.Duration, want ...corev1.NodeAddress) time.Duration {
	w.t.Helper()
	start := time.Now()
	w.h.CP.WaitNode(w.t, w.h.Node, timeout, "addresses "+harness.FormatAddrs(want), func(n *corev1.Node) bool {
		return slices.Equal(n.Status.Addresses, want)
	})
	return time.Since(start)
}

func (w *world) statusWrites() int { return w.h.CP.Writes(w.t, w.h.Node)["status"] }

// startWrites returns the status writes of the start, once the Node has its first full list: one,
// or two when the InternalIP write goes out before the first STUN round answers (the InternalIP
// never waits for discovery; the private route source is never published as ExternalIP).
func (w *world) startWrites() int {
	w.t.Helper()
	n := w.statusWrites()
	if n < 1 || n > 2 {
		w.t.Fatalf("status writes at start = %d, want 1 or 2", n)
	}
	w.t.Logf("status writes at start: %d", n)
	return n
}

// waitMetric waits until the agent's counter reaches at least n.
func waitMetric(a *harness.Agent, name string, n float64, timeout time.Duration) {
	a.WaitMetric(name, timeout, func(v float64) bool { return v >= n })
}

const (
	agreed       = `nodeaddr_discovery_rounds_total{family="IPv4",result="agreed"}`
	noAnswer     = `nodeaddr_discovery_rounds_total{family="IPv4",result="no_answer"}`
	disagreement = `nodeaddr_discovery_rounds_total{family="IPv4",result="disagreement"}`
)

// The router's public address changes with no event on the node: the re-check finds it, and the
// Node's ExternalIP follows with exactly one write. The private route source is never published.
func TestNATAddressChangeFollowed(t *testing.T) {
	w := newWorld(t, "nat-change", 3)
	a := w.start()
	w.waitAddresses(30*time.Second, harness.Addr(in, "10.0.1.10"), harness.Addr(ext, "203.0.113.10"), harness.Addr(hn, "nat-change"))
	w0 := w.startWrites()
	rounds := a.Metric(agreed)

	w.nat.SetSNAT(harness.SNAT{From: "10.0.0.0/16", Public: "203.0.113.20"})
	took := w.waitAddresses(interval*11/10+10*time.Second, harness.Addr(in, "10.0.1.10"), harness.Addr(ext, "203.0.113.20"), harness.Addr(hn, "nat-change"))
	t.Logf("ExternalIP followed the router's new public address in %s (re-check interval %s)", took.Round(time.Millisecond), interval)
	if n := w.statusWrites() - w0; n != 1 {
		t.Fatalf("status writes for the change = %d, want 1", n)
	}
	if a.Metric(agreed) <= rounds {
		t.Errorf("no agreed round counted after the change")
	}
	for _, s := range w.servers {
		if v := a.Metric(fmt.Sprintf(`nodeaddr_discovery_probes_total{result="success",server="%s:3478"}`, s.Addr)); v < 2 {
			t.Errorf("server %s: %v successful probes, want at least 2", s.Addr, v)
		}
	}
}

// The node's uplink is renumbered behind the NAT (DHCP gives an address in another subnet, which
// the router maps elsewhere): the new route source is probed at once and the ExternalIP follows
// with one write; the old mapping stays published until then, never an empty list.
func TestNATUplinkRenumberedFollowed(t *testing.T) {
	w := newWorld(t, "nat-renumber", 2)
	w.nat.SetSNAT(harness.SNAT{From: "10.0.1.0/24", Public: "203.0.113.10"}, harness.SNAT{From: "10.0.2.0/24", Public: "203.0.113.11"})
	// A long interval: only the route-source change can explain a new probe.
	a := w.h.Start("--external-ip-discovery="+w.servers[0].URL()+","+w.servers[1].URL(),
		"--external-ip-discovery-interval=10m", "--internal-ip-target=none")
	w.waitAddresses(30*time.Second, harness.Addr(ext, "203.0.113.10"), harness.Addr(hn, "nat-renumber"))
	if n := w.statusWrites(); n != 1 {
		t.Fatalf("status writes after start = %d, want 1", n)
	}
	rounds := a.Metric(agreed)

	// Break-before-make, as a DHCP client does it.
	w.nat.RouterAddr("eth0", "10.0.2.1/24")
	w.h.NS.IP("addr", "del", "10.0.1.10/24", "dev", "eth0")
	w.h.NS.IP("addr", "add", "10.0.2.10/24", "dev", "eth0")
	w.h.NS.IP("route", "replace", "default", "via", "10.0.2.1", "dev", "eth0")
	took := w.waitAddresses(15*time.Second, harness.Addr(ext, "203.0.113.11"), harness.Addr(hn, "nat-renumber"))
	t.Logf("ExternalIP followed the renumbered uplink in %s", took.Round(time.Millisecond))
	if n := w.statusWrites(); n != 2 {
		t.Fatalf("status writes = %d, want 2 (one for the renumbering)", n)
	}
	if got := a.Metric(agreed) - rounds; got < 1 {
		t.Errorf("agreed rounds after the renumbering: %v, want at least 1", got)
	}
}

// outage is how long the STUN servers stay down: two minutes (several discovery rounds), or
// NODEADDR_NAT_OUTAGE for a quicker local run.
func outage(t *testing.T) time.Duration {
	if v := os.Getenv("NODEADDR_NAT_OUTAGE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("NODEADDR_NAT_OUTAGE: %v", err)
		}
		return d
	}
	return 2 * time.Minute
}

// Every STUN server is down for a while: the Node keeps its ExternalIP, no write and never an
// empty or shorter list; discovery counts the failed rounds and recovers when the servers return.
func TestNATServersDownNoWrite(t *testing.T) {
	w := newWorld(t, "nat-outage", 2)
	a := w.start()
	want := []corev1.NodeAddress{harness.Addr(in, "10.0.1.10"), harness.Addr(ext, "203.0.113.10"), harness.Addr(hn, "nat-outage")}
	w.waitAddresses(30*time.Second, want...)
	waitMetric(a, agreed, 1, 10*time.Second)
	w0 := w.startWrites()

	for _, s := range w.servers {
		s.Stop()
	}
	d := outage(t)
	t.Logf("STUN servers down for %s (NODEADDR_NAT_OUTAGE)", d)
	end := time.Now().Add(d)
	polls := 0
	for time.Now().Before(end) { // measured window: the outage, the Node polled throughout
		n := w.h.CP.Node(t, w.h.Node)
		if !slices.Equal(n.Status.Addresses, want) {
			t.Fatalf("during the outage the Node has %s, want %s", harness.FormatAddrs(n.Status.Addresses), harness.FormatAddrs(want))
		}
		polls++
		time.Sleep(200 * time.Millisecond) // measured window: the outage's poll period
	}
	failed := a.Metric(noAnswer)
	if failed < 2 {
		t.Errorf("%v rounds without an answer during a %s outage, want at least 2", failed, d)
	}
	timeouts := a.Metric(`nodeaddr_discovery_probes_total{result="timeout",server="198.51.100.1:3478"}`)
	t.Logf("outage: %d polls of the Node, all %s; %v rounds without an answer, %v probe timeouts on 198.51.100.1",
		polls, harness.FormatAddrs(want), failed, timeouts)

	for _, s := range w.servers {
		s.Start()
	}
	before := a.Metric(agreed)
	waitMetric(a, agreed, before+1, 30*time.Second)
	if n := w.statusWrites() - w0; n != 0 {
		t.Fatalf("status writes during and after the outage = %d, want 0", n)
	}
}

// Per-destination SNAT makes the two servers see different addresses: no write, the last agreed
// address stays, and exactly one Warning Event names both answers.
func TestNATServersDisagreeWarning(t *testing.T) {
	w := newWorld(t, "nat-disagree", 2)
	a := w.start()
	want := []corev1.NodeAddress{harness.Addr(in, "10.0.1.10"), harness.Addr(ext, "203.0.113.10"), harness.Addr(hn, "nat-disagree")}
	w.waitAddresses(30*time.Second, want...)
	w0 := w.startWrites()

	w.nat.SetSNAT(harness.SNAT{From: "10.0.0.0/16", To: "198.51.100.2", Public: "203.0.113.99"},
		harness.SNAT{From: "10.0.0.0/16", Public: "203.0.113.10"})
	waitMetric(a, disagreement, 3, 30*time.Second)
	evs := w.h.CP.WaitEvents(t, w.h.Node, "ExternalIPDisagreement", 1, 15*time.Second)
	e := evs[0]
	if e.Type != corev1.EventTypeWarning || !strings.Contains(e.Message, "198.51.100.1:3478=203.0.113.10") ||
		!strings.Contains(e.Message, "198.51.100.2:3478=203.0.113.99") {
		t.Errorf("event %s %q, want a Warning naming both servers' answers", e.Type, e.Message)
	}
	if n := w.h.CP.Node(t, w.h.Node); !slices.Equal(n.Status.Addresses, want) {
		t.Errorf("Node has %s, want %s (the last agreed address)", harness.FormatAddrs(n.Status.Addresses), harness.FormatAddrs(want))
	}
	if n := w.statusWrites() - w0; n != 0 {
		t.Fatalf("status writes for the disagreement = %d, want 0", n)
	}
}

// --dry-run --run-once probes before it prints: the preview has the discovered ExternalIP.
func TestNATDryRunPrintsTheDiscoveredAddress(t *testing.T) {
	w := newWorld(t, "nat-dryrun", 2)
	code, out := harness.RunAgent(t, w.h.NS, harness.AgentOptions{Kubeconfig: "none", Args: []string{
		"--dry-run", "--run-once", "--node-name=nat-dryrun", "--metrics-bind-address=0",
		"--external-ip-discovery=" + w.servers[0].URL() + "," + w.servers[1].URL()}}, 30*time.Second)
	want := `{"addresses":[{"type":"InternalIP","address":"10.0.1.10"},{"type":"ExternalIP","address":"203.0.113.10"}]}`
	if code != 0 || !strings.Contains(out, want+"\n") {
		t.Errorf("exit %d, output:\n%s\nwant the line %s", code, out, want)
	}
}

// Dual stack: NAT44 and NAT66 on the router, two STUN servers of each family; each family's
// ExternalIP is the address its own servers agree on.
func TestNATDualStack(t *testing.T) {
	w := newWorld(t, "nat-dual", 2)
	w.nat.NodeUplink6("eth0", "fd00:1::10/64", "fd00:1::1")
	w.nat.SetSNAT(harness.SNAT{From: "10.0.0.0/16", Public: "203.0.113.10"}, harness.SNAT{From: "fd00:1::/64", Public: "2001:db8:113::10"})
	w.servers = append(w.servers, w.nat.StartSTUN("2001:db8:100::1"), w.nat.StartSTUN("2001:db8:100::2"))
	a := w.start()
	w.waitAddresses(30*time.Second, harness.Addr(in, "10.0.1.10"), harness.Addr(in, "fd00:1::10"),
		harness.Addr(ext, "203.0.113.10"), harness.Addr(ext, "2001:db8:113::10"), harness.Addr(hn, "nat-dual"))
	w.startWrites() // both families' answers come in one signal: never one write per family
	for _, f := range []string{"IPv4", "IPv6"} {
		if v := a.Metric(`nodeaddr_discovery_rounds_total{family="` + f + `",result="agreed"}`); v < 1 {
			t.Errorf("%s: %v agreed rounds, want at least 1", f, v)
		}
	}
}
