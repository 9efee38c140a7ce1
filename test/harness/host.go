package harness

import (
	"fmt"
	"strconv"
	"testing"
)

// Host is one end-to-end world: a control plane with the agent's RBAC, a node namespace linked to a
// router namespace, and a kubeconfig with a pod-bound token for the agent of Node.
type Host struct {
	T          testing.TB
	CP         *ControlPlane
	Node       string
	NS, Router *Netns
	Kubeconfig string
}

// NewHost builds a Host; everything is torn down when t ends. IPv4 secondary addresses are promoted
// when the primary goes (make-before-break renumbering, as network managers do it).
func NewHost(t testing.TB, node string) *Host {
	t.Helper()
	RequireE2E(t)
	cp := StartControlPlane(t)
	cp.ApplyRBAC(t)
	return NewHostOn(t, cp, node)
}

// NewHostOn is NewHost on a running control plane where the agent's ServiceAccount exists.
func NewHostOn(t testing.TB, cp *ControlPlane, node string) *Host {
	t.Helper()
	h := &Host{T: t, CP: cp, Node: node, NS: NewNetns(t, "node"), Router: NewNetns(t, "rtr")}
	h.NS.Sysctl("net.ipv4.conf.all.promote_secondaries", "1")
	h.NS.Sysctl("net.ipv4.conf.default.promote_secondaries", "1")
	h.Kubeconfig = cp.AgentKubeconfig(t, h.NS, node)
	return h
}

// Uplink links the node to the router through dev, with an IPv4 address and a default route of
// metric.
func (h *Host) Uplink(dev, cidr4, gw4 string, metric int) {
	h.T.Helper()
	AddUplink(h.NS, h.Router, dev, cidr4, gw4, metric)
}

// Uplink6 adds an IPv6 address (without duplicate-address detection) and default route on dev.
func (h *Host) Uplink6(dev, cidr6, gw6 string, metric int) {
	h.T.Helper()
	AddUplink6(h.NS, dev, cidr6, gw6, metric)
}

// AddUplink links ns to router through dev (peer "r-"+dev) with the IPv4 address cidr4 and, when
// gw4 is set, a default route through it of metric.
func AddUplink(ns, router *Netns, dev, cidr4, gw4 string, metric int) {
	ns.Link(dev, router, "r-"+dev)
	ns.IP("addr", "add", cidr4, "dev", dev)
	if gw4 != "" {
		ns.IP("route", "add", "default", "via", gw4, "dev", dev, "metric", strconv.Itoa(metric))
	}
}

// AddUplink6 adds the IPv6 address cidr6 (without duplicate-address detection) to dev, and a default
// route through gw6 of metric.
func AddUplink6(ns *Netns, dev, cidr6, gw6 string, metric int) {
	ns.IP("-6", "addr", "add", cidr6, "dev", dev, "nodad")
	ns.IP("-6", "route", "add", "default", "via", gw6, "dev", dev, "metric", strconv.Itoa(metric))
}

// DualStackUplink gives ns the uplink most tests use: eth0 with 192.0.2.10/24 and 2001:db8::10/64,
// default routes via .1 and ::1, linked to router.
func DualStackUplink(ns, router *Netns) {
	AddUplink(ns, router, "eth0", "192.0.2.10/24", "192.0.2.1", 100)
	AddUplink6(ns, "eth0", "2001:db8::10/64", "2001:db8::1", 100)
}

// Start runs the agent for Node with args.
func (h *Host) Start(args ...string) *Agent {
	return StartAgent(h.T, h.NS, AgentOptions{Args: append([]string{"--node-name=" + h.Node}, args...), Kubeconfig: h.Kubeconfig})
}

// RouteBatch returns `ip -batch` lines that add, and then delete, n distinct /32 routes via gw on
// dev: the churn a routing daemon or a busy CNI produces.
func RouteBatch(n int, gw, dev string) (add, del []string) {
	for i := 0; i < n; i++ {
		r := fmt.Sprintf("10.%d.%d.%d/32 via %s dev %s", i>>16, (i>>8)&255, i&255, gw, dev)
		add = append(add, "route add "+r)
		del = append(del, "route del "+r)
	}
	return add, del
}

// FlapBatch returns `ip -batch` lines for an address flap storm on dev: n cycles of renumbering
// from the address from to the address to and back (both with their prefix length, make-before-
// break), then once more to to, where the storm ends.
func FlapBatch(n int, dev, from, to string) []string {
	var lines []string
	for i := 0; i < n; i++ {
		lines = append(lines, "addr add "+to+" dev "+dev, "addr del "+from+" dev "+dev,
			"addr add "+from+" dev "+dev, "addr del "+to+" dev "+dev)
	}
	return append(lines, "addr add "+to+" dev "+dev, "addr del "+from+" dev "+dev)
}
