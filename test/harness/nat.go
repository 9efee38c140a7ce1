package harness

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// NAT puts a node namespace behind a router namespace that masquerades with nftables toward an
// "internet" namespace, where real STUN servers (coturn's turnserver --stun-only) listen. Nothing
// leaves the test's namespaces: the internet namespace has no route anywhere else.
//
//	node (eth0 10.0.1.10/24) ── router (r-eth0 10.0.1.1/24, wan0 100.64.0.2/30, SNAT; IPv6 alike, NAT66)
//	  ── internet (inet0 100.64.0.1/30, STUN servers on lo, 203.0.113.0/24 routed back to the router)
type NAT struct {
	t               testing.TB
	Node, Router    *Netns
	Internet        *Netns
	nft, turnserver string
}

// SNAT is one source-NAT rule of the router: packets from the From prefix (to To, when set) leave
// with the source address Public; IPv6 prefixes make a NAT66 rule.
type SNAT struct {
	From, To, Public string
}

// RequireNAT returns the paths of nft and turnserver, skipping loudly (failing under
// NODEADDR_E2E=require) when Debian's nftables or coturn is missing.
func RequireNAT(t testing.TB) (nft, turnserver string) {
	t.Helper()
	return Tool(t, "nft", "nftables"), Tool(t, "turnserver", "coturn")
}

// NewNAT wires the router between h's node namespace and a new internet namespace. The node's
// uplinks are added with NodeUplink; no SNAT rule exists until SetSNAT.
func NewNAT(h *Host) *NAT {
	t := h.T
	t.Helper()
	nft, turn := RequireNAT(t)
	n := &NAT{t: t, Node: h.NS, Router: h.Router, Internet: NewNetns(t, "inet"), nft: nft, turnserver: turn}
	n.Router.Sysctl("net.ipv4.ip_forward", "1")
	n.Router.Link("wan0", n.Internet, "inet0")
	n.Router.IP("addr", "add", "100.64.0.2/30", "dev", "wan0")
	n.Router.IP("route", "add", "default", "via", "100.64.0.1", "dev", "wan0")
	n.Internet.IP("addr", "add", "100.64.0.1/30", "dev", "inet0")
	n.Internet.IP("route", "add", "203.0.113.0/24", "via", "100.64.0.2", "dev", "inet0")
	// IPv6 (NAT66 toward 2001:db8:113::/64, which the internet routes back to the router).
	n.Router.Sysctl("net.ipv6.conf.all.forwarding", "1")
	n.Router.IP("-6", "addr", "add", "2001:db8:ffff::2/64", "dev", "wan0", "nodad")
	n.Router.IP("-6", "route", "add", "default", "via", "2001:db8:ffff::1", "dev", "wan0")
	n.Internet.IP("-6", "addr", "add", "2001:db8:ffff::1/64", "dev", "inet0", "nodad")
	n.Internet.IP("-6", "route", "add", "2001:db8:113::/64", "via", "2001:db8:ffff::2", "dev", "inet0")
	n.SetSNAT()
	return n
}

// NodeUplink6 gives the node's uplink dev an IPv6 address (no duplicate-address detection) and a
// default route through gw, which the router takes on its side.
func (n *NAT) NodeUplink6(dev, cidr, gw string) {
	n.t.Helper()
	AddUplink6(n.Node, dev, cidr, gw, 100)
	n.Router.IP("-6", "addr", "add", gw+"/"+strings.SplitN(cidr, "/", 2)[1], "dev", "r-"+dev, "nodad")
}

// NodeUplink links the node to the router through dev with cidr (the router takes gw on its side)
// and a default route through gw.
func (n *NAT) NodeUplink(dev, cidr, gw string) {
	n.t.Helper()
	AddUplink(n.Node, n.Router, dev, cidr, gw, 100)
	n.RouterAddr(dev, gw+"/"+strings.SplitN(cidr, "/", 2)[1])
}

// RouterAddr adds an address to the router's side of the node's uplink dev (a renumbered subnet).
func (n *NAT) RouterAddr(dev, cidr string) {
	n.t.Helper()
	n.Router.IP("addr", "add", cidr, "dev", "r-"+dev)
}

// SetSNAT replaces the router's source-NAT rules atomically (one nft transaction). Existing
// conntrack entries keep their mapping; a new socket (a new source port) gets the new one.
func (n *NAT) SetSNAT(rules ...SNAT) {
	n.t.Helper()
	var b strings.Builder
	b.WriteString("table inet nodeaddr_nat\ndelete table inet nodeaddr_nat\ntable inet nodeaddr_nat {\n" +
		"  chain postrouting {\n    type nat hook postrouting priority srcnat; policy accept;\n")
	for _, r := range rules {
		fam := "ip"
		if strings.Contains(r.From, ":") {
			fam = "ip6"
		}
		fmt.Fprintf(&b, "    oifname \"wan0\" %s saddr %s", fam, r.From)
		if r.To != "" {
			fmt.Fprintf(&b, " %s daddr %s", fam, r.To)
		}
		fmt.Fprintf(&b, " snat %s to %s\n", fam, r.Public)
	}
	b.WriteString("  }\n}\n")
	cmd := n.Router.Exec(n.nft, "-f", "-")
	cmd.Stdin = strings.NewReader(b.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		n.t.Fatalf("nft -f: %v: %s\n%s", err, out, b.String())
	}
}

// STUNServer is one turnserver --stun-only in the internet namespace.
type STUNServer struct {
	Addr string // the IPv4 address it listens on, port 3478
	n    *NAT
	dir  string
	p    *proc
}

// URL is the server as --external-ip-discovery names it.
func (s *STUNServer) URL() string { return "stun:" + s.hostPort() }

func (s *STUNServer) hostPort() string { return net.JoinHostPort(s.Addr, "3478") }

// StartSTUN adds addr (IPv4 or IPv6) to the internet namespace's loopback and starts a STUN
// server on it; it is stopped when the test ends.
func (n *NAT) StartSTUN(addr string) *STUNServer {
	n.t.Helper()
	if strings.Contains(addr, ":") {
		n.Internet.IP("-6", "addr", "add", addr+"/128", "dev", "lo", "nodad")
	} else {
		n.Internet.IP("addr", "add", addr+"/32", "dev", "lo")
	}
	dir, err := os.MkdirTemp("", "nodeaddr-stun-")
	if err != nil {
		n.t.Fatal(err)
	}
	s := &STUNServer{Addr: addr, n: n, dir: dir}
	n.t.Cleanup(func() { s.Stop(); os.RemoveAll(dir) })
	s.Start()
	return s
}

// Start (re)starts the server and waits until its UDP socket is bound.
func (s *STUNServer) Start() {
	t := s.n.t
	t.Helper()
	cmd := s.n.Internet.Exec(s.n.turnserver, "-n", "--stun-only", "-L", s.Addr, "-p", "3478",
		"--no-tls", "--no-dtls", "--no-cli", "--no-rfc5780", "--no-software-attribute",
		"--log-file=stdout", "--simple-log", "--pidfile="+filepath.Join(s.dir, "pid"),
		"--userdb="+filepath.Join(s.dir, "turndb"))
	var err error
	// Appended, so that a restart (the outage scenario) keeps the first run's log.
	if s.p, err = startLogged(cmd, filepath.Join(s.dir, "log")); err != nil {
		t.Fatalf("start turnserver on %s: %v", s.Addr, err)
	}
	if err := Poll(10*time.Second, 50*time.Millisecond, "turnserver on "+s.Addr+" listening", func() (bool, string) {
		out, _ := s.n.Internet.Exec("ss", "-Hnlu", "src", s.hostPort()).Output()
		if strings.Contains(string(out), s.hostPort()) {
			return true, ""
		}
		select {
		case <-s.p.done:
			t.Fatalf("turnserver on %s exited: %s", s.Addr, tailFile(filepath.Join(s.dir, "log"), 20))
		default:
		}
		return false, fmt.Sprintf("ss -Hnlu src %s: %q", s.hostPort(), out)
	}); err != nil {
		t.Fatalf("%v\n%s", err, tailFile(filepath.Join(s.dir, "log"), 20))
	}
}

// Stop stops the server (a STUN server outage).
func (s *STUNServer) Stop() {
	s.p.stop()
	s.p = nil
}
