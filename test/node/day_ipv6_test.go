package node

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/nodeaddr/nodeaddr/internal/vocab"
	"github.com/nodeaddr/nodeaddr/test/harness"
)

// The IPv6 renumbering day's uplink: eth0 (MAC node6MAC, addr_gen_mode 0: EUI-64 interface
// identifier ::ff:fe00:10) takes its only global address by SLAAC from radvd on the router's
// r-eth0, which announces prefix6Old and later renumbers to prefix6New. The router holds an address
// in each prefix, the NodePort's outside client. Documentation ranges, inside the test's
// namespaces only.
const (
	node6MAC               = "02:00:00:00:00:10"
	prefix6Old, prefix6New = "2001:db8:1::/64", "2001:db8:2::/64"
	oldIP6, newIP6         = "2001:db8:1::ff:fe00:10", "2001:db8:2::ff:fe00:10"
	router6Old, router6New = "2001:db8:1::1", "2001:db8:2::1"
)

// The router's prefixes. The old one is valid for 20 s at a time (each advertisement, every 3 to
// 4 s, renews it): once withdrawn (valid 0, which the kernel does not apply to a remaining lifetime
// under two hours, RFC 4862 5.5.3e) its address expires within 20 s.
var (
	ra6Old = harness.Prefix6{Prefix: prefix6Old, Preferred: 15, Valid: 20}
	ra6New = harness.Prefix6{Prefix: prefix6New, Preferred: 1800, Valid: 3600}
)

// day6Args are the agent's arguments besides the shipped base and component: none, the defaults.
// The ExternalIP is the route source toward the internet target; on this one-uplink node it equals
// the InternalIP and is dropped, also while both prefixes are preferred, when the kernel prefers
// the newest address (equal RFC 6724 ranks; Linux keeps a device's addresses newest first): the
// previous IPv6 address on the route's link stays, so the announcement writes nothing.
var day6Args []string

// day6 is the renumbering day on an IPv6-only node numbered by a router.
type day6 struct {
	*day
	radvd *harness.Radvd
}

// TestRenumberingDayIPv6 is the renumbering day's logs/exec and NodePort scenarios on an IPv6-only
// node: eth0's only global address comes by SLAAC from radvd; the cluster is dual-stack
// (harness.ClusterOptions.DualStack: an IPv6 Service CIDR besides the IPv4 primary one, pods with
// an IPv6 address too) so that the web pod's NodePort Service is IPv6; nodeaddr (the shipped base
// with the kubelet-serving-csr component, day6Args) publishes the SLAAC address as the only
// InternalIP, which the API server dials for logs and exec. The router then renumbers
// make-before-break: it announces the new prefix beside the old, deprecates the old (preferred
// lifetime 0), and withdraws it (valid lifetime 0).
//
// IPv6-only rather than dual-stack with IPv6 primary: nodeaddr orders the families by the Node's
// current first InternalIP, else IPv4 (docs/merging.md), and the kubelet registers its Node with a
// Hostname only (--cloud-provider=external, no --node-ip), so a dual-stack node's first InternalIP
// would be IPv4 and the API server would reach the kubelet over IPv4; making IPv6 primary would take
// a static --node-ip, which a router-numbered node cannot know and which renumbering invalidates.
func TestRenumberingDayIPv6(t *testing.T) {
	d := newDay6(t)
	if !t.Run("9-ipv6-logs-exec-fresh-node", d.fresh6) {
		return
	}
	t.Run("9-ipv6-renumber-ra-make-before-break", d.renumber6)
}

// newDay6 starts the hardened, dual-stack cluster with the web pod's image on the node, and radvd
// numbering eth0 from prefix6Old before the kubelet starts (a node that boots on its network).
func newDay6(t *testing.T) *day6 {
	webTar := filepath.Join(t.TempDir(), "webpod.tar")
	err := harness.WriteImage(webTar, webImage, harness.MustBuildNode(t).Webpod, "/webpod", harness.ImageUser,
		[]string{"/webpod", "serve"})
	if err != nil {
		t.Fatal(err)
	}
	d := &day6{}
	w := newWorld(t, worldOptions{cluster: harness.ClusterOptions{Hardened: true, DualStack: true},
		node: harness.NodeOptions{Images: []string{webTar}}, uplink: func(ns, router *harness.Netns) {
			slaacUplink(ns)
			router.IP("-6", "addr", "add", router6Old+"/64", "dev", "r-eth0", "nodad")
			router.IP("-6", "addr", "add", router6New+"/64", "dev", "r-eth0", "nodad")
			d.radvd = harness.StartRadvd(t, router, "r-eth0", harness.RA{Prefixes: []harness.Prefix6{ra6Old}})
			a := harness.WaitAddr6(t, ns, "eth0", oldIP6+" usable", func(a harness.Addr6) bool { return a.Local == oldIP6 && a.Usable() })
			t.Logf("eth0 numbered by SLAAC from %s: %s (valid %d s, preferred %d s)", prefix6Old, a, a.Valid, a.Preferred)
		}})
	d.day = &day{world: w}
	return d
}

// slaacUplink makes eth0 a host interface numbered by router advertisements only: the EUI-64
// identifier of node6MAC (eth0 brought down and up again so that its link-local address follows),
// no privacy addresses, and accept_ra 2 because the CNI bridge plugin turns IPv6 forwarding on with
// the first pod (with accept_ra 1 a forwarding interface ignores advertisements, and the kernel
// drops the routers it learned from them when forwarding goes on).
func slaacUplink(ns *harness.Netns) {
	ns.IP("link", "set", "eth0", "down")
	ns.IP("link", "set", "eth0", "address", node6MAC)
	conf := "net.ipv6.conf.eth0."
	ns.Sysctl(conf+"accept_ra", "2")
	ns.Sysctl(conf+"autoconf", "1")
	ns.Sysctl(conf+"addr_gen_mode", "0")
	ns.Sysctl(conf+"use_tempaddr", "0")
	ns.IP("link", "set", "eth0", "up")
}

// addresses6 is what the agent publishes on the IPv6-only node: the route source toward the IPv6
// default target as the only InternalIP (there is no IPv4 route; the ExternalIP is not managed,
// day6Args), then the kubelet's Hostname, kept.
func addresses6(node, ip string) []corev1.NodeAddress {
	return []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}, {Type: corev1.NodeHostName, Address: node}}
}

// fresh6: the base plus the component on the fresh IPv6-only node (kube-proxy already running):
// the Node gets the SLAAC address as its only InternalIP, logs and exec of the web pod work once
// the central approver approved the kubelet's serving CSR for it, and the IPv6 NodePort answers on
// it from the router.
func (d *day6) fresh6(t *testing.T) {
	d.t = t
	applied := d.applyWithWeb(t, []corev1.IPFamily{corev1.IPv6Protocol}, day6Args...)
	d.waitAddresses(addresses6(d.node.Name, oldIP6))
	published := time.Since(applied)
	leader := d.waitApproverLeading(t)
	approverReady := time.Since(applied)
	if slices.ContainsFunc(d.approverPods(), func(p corev1.Pod) bool { return restarts(&p) > 0 }) {
		// Why they restarted, beside kube-proxy's restarts (recorded, not asserted: the IPv4 day
		// does not either).
		d.logApprovers(t)
		t.Logf("apply at %s; kube-proxy exited at %v: %v", applied.UTC().Format(time.StampMilli),
			stamps(d.proxy.Exits()), d.proxy.ExitReasons())
	}
	var web *corev1.Pod
	harness.Eventually(d.t, 3*time.Minute, 100*time.Millisecond, "the web pod Running with an IPv6 address", func() (bool, string) {
		web = d.pod("default", "app=webpod")
		return web != nil && web.Status.Phase == corev1.PodRunning && podIP6(web) != "", podSeen(web)
	})
	d.web = web.Name
	t.Logf("web pod %s: podIPs %v, hostIPs %v", web.Name, web.Status.PodIPs, web.Status.HostIPs)
	var last error
	harness.Eventually(d.t, 2*time.Minute, 100*time.Millisecond, "kubectl logs and exec working", func() (bool, string) { last = d.works(); return last == nil, fmt.Sprint(last) })
	working := time.Since(applied)
	approved := d.approvedServingCSRs(t) // fails t for a CSR approved by anyone but the approver
	i := slices.IndexFunc(approved, func(c certv1.CertificateSigningRequest) bool { return slices.Contains(csrIPs(&c), oldIP6) })
	if i < 0 {
		t.Fatalf("logs and exec work, but no approved kubelet-serving CSR names %s (approved: %d)", oldIP6, len(approved))
	}
	d.waitApprovedEvent(t, approved[i].Name)
	if got := d.servingIPs(oldIP6); !slices.Contains(got, oldIP6) {
		t.Errorf("the kubelet at [%s]:10250 presents IP SANs %v, want %s", oldIP6, got, oldIP6)
	}
	harness.Eventually(d.t, time.Minute, 100*time.Millisecond, "the IPv6 NodePort answering on "+oldIP6, func() (bool, string) { last = d.nodePortAnswers(oldIP6); return last == nil, fmt.Sprint(last) })
	nodePort := time.Since(applied)
	d.checkAgentPod(t, oldIP6)
	report(t, "apply→Node [%s] %s, →approver leading and ready %s (%s), →logs+exec over IPv6 %s (CSR %s IP SANs %v approved by the approver), →IPv6 NodePort %s",
		oldIP6, published.Round(100*time.Millisecond), approverReady.Round(100*time.Millisecond), leader,
		working.Round(100*time.Millisecond), approved[i].Name, csrIPs(&approved[i]), nodePort.Round(100*time.Millisecond))
}

// renumber6: the router renumbers make-before-break. With both prefixes preferred the Node keeps
// the old address; once the old prefix is deprecated it moves to the new prefix's address in
// exactly one status write, which carries the approval record too, never through another list;
// the kubelet's new serving CSR names the new address only and the central approver approves it;
// kubectl logs and exec work again within workBound of the deprecating announcement; kube-proxy
// restarts once and serves the NodePort on the new address. The withdrawal of the old prefix
// changes nothing more; with the old address put back on eth0 (deprecated: the host's, not the
// Node's) the NodePort is not served there.
func (d *day6) renumber6(t *testing.T) {
	d.t = t
	exits := len(d.proxy.Exits())
	writesBefore := d.writeCounts()
	nw := d.watchNode()
	before, after := addresses6(d.node.Name, oldIP6), addresses6(d.node.Name, newIP6)

	// Make: the new prefix beside the old, both preferred.
	announced := time.Now()
	d.radvd.Announce(harness.RA{Prefixes: []harness.Prefix6{ra6Old, ra6New}})
	harness.WaitAddr6(t, d.ns, "eth0", newIP6+" usable", func(a harness.Addr6) bool { return a.Local == newIP6 && a.Usable() })
	usable := time.Since(announced)
	// A second preferred prefix is no renumbering: the agent resolves within its debounce (at most
	// --debounce-max-delay, 1 s); 3 s later the Node must still name the old address.
	time.Sleep(3 * time.Second) // measured window: a wrong agent would have moved the address by now
	t.Logf("both prefixes preferred (%s after the announcement): eth0 %v, source toward 2001:4860:4860::8888 %s",
		usable.Round(10*time.Millisecond), harness.Addrs6(t, d.ns, "eth0"), harness.RouteSource6(d.ns, "2001:4860:4860::8888"))
	if got := d.node.Node(t).Status.Addresses; !reflect.DeepEqual(got, before) {
		t.Errorf("with both prefixes preferred the Node's addresses are %v, want %v (the old address while it is preferred)", got, before)
	}

	// Deprecate the old prefix: the renumbering.
	tr := d.trackPhases(newIP6)
	old := ra6Old
	old.Preferred = 0
	moved := time.Now()
	d.radvd.Announce(harness.RA{Prefixes: []harness.Prefix6{old, ra6New}})
	harness.WaitAddr6(t, d.ns, "eth0", "deprecated "+oldIP6, func(a harness.Addr6) bool { return a.Local == oldIP6 && a.Deprecated })
	deprecated := time.Since(moved)
	var last error
	harness.Eventually(d.t, 2*time.Minute, 100*time.Millisecond, "kubectl logs and exec working after the renumbering", func() (bool, string) { last = d.works(); return last == nil, fmt.Sprint(last) })
	working := time.Since(moved)
	if working > workBound {
		t.Errorf("kubectl logs and exec worked again %s after the deprecating announcement, want within %s", working, workBound)
	}
	times := tr.finish(moved)
	times.working = working
	harness.Eventually(d.t, time.Minute, 100*time.Millisecond, "the IPv6 NodePort answering on "+newIP6, func() (bool, string) { last = d.nodePortAnswers(newIP6); return last == nil, fmt.Sprint(last) })
	times.nodePort = time.Since(moved)
	if e := d.proxy.Exits(); len(e) > exits {
		times.proxyExit = e[exits].Sub(moved)
	}

	// Break: the old prefix withdrawn; its address expires within its remaining valid lifetime.
	old.Valid = 0
	withdrawn := time.Now()
	d.radvd.Announce(harness.RA{Prefixes: []harness.Prefix6{old, ra6New}})
	harness.Eventually(d.t, time.Minute, 100*time.Millisecond, oldIP6+" gone from eth0", func() (bool, string) {
		addrs := harness.Addrs6(t, d.ns, "eth0")
		return !slices.ContainsFunc(addrs, func(a harness.Addr6) bool { return a.Local == oldIP6 }), fmt.Sprintf("eth0 has %v", addrs)
	})
	gone := time.Since(withdrawn)
	// The withdrawn prefix no longer announced; as above, time for a (wrong) reaction.
	d.radvd.Announce(harness.RA{Prefixes: []harness.Prefix6{ra6New}})
	time.Sleep(3 * time.Second) // measured window: time for a (wrong) reaction
	if err := d.works(); err != nil {
		t.Errorf("kubectl logs and exec after the old prefix expired: %v", err)
	}
	if err := d.nodePortAnswers(newIP6); err != nil {
		t.Errorf("the NodePort on %s after the old prefix expired: %v", newIP6, err)
	}
	// The old address back on eth0, deprecated: the host's, not the Node's.
	d.ns.IP("-6", "addr", "add", oldIP6+"/64", "dev", "eth0", "nodad", "preferred_lft", "0")
	if err := d.nodePortAnswers(oldIP6); err == nil {
		t.Errorf("the NodePort answers on the old address %s", oldIP6)
	}
	time.Sleep(2 * time.Second) // measured window: a wrong agent would publish the deprecated address by now
	if got := d.node.Node(t).Status.Addresses; !reflect.DeepEqual(got, after) {
		t.Errorf("with %s back (deprecated) the Node's addresses are %v, want %v", oldIP6, got, after)
	}
	d.ns.IP("-6", "addr", "del", oldIP6+"/64", "dev", "eth0")

	// Exactly one move, in one write: every Node version has the old list or the new one, the old
	// ones first.
	versions := nw.finish()
	moves, state := 0, before
	for _, n := range versions {
		got := n.Status.Addresses
		switch {
		case reflect.DeepEqual(got, state):
		case reflect.DeepEqual(state, before) && reflect.DeepEqual(got, after):
			moves++
			state = after
		default:
			t.Errorf("Node version %s has addresses %v, want %v and then %v only", n.ResourceVersion, got, before, after)
		}
	}
	if moves != 1 || !reflect.DeepEqual(state, after) {
		t.Errorf("the Node moved %d times (%d versions seen, last %v), want once to %v", moves, len(versions), state, after)
	}
	writes := d.writeCounts()
	status, other := writes["status"]-writesBefore["status"], writes[""]-writesBefore[""]
	if status != 1 || other != 0 {
		t.Errorf("the agent made %d status writes and %d other Node writes during the renumbering, want 1 (the addresses with the approval record) and 0",
			status, other)
	}
	n := d.node.Node(t)
	if rec := n.Annotations[vocab.RecordAnnotation]; rec != newIP6 {
		t.Errorf("approval record %s=%q, want %q", vocab.RecordAnnotation, rec, newIP6)
	}

	// The kubelet's new serving CSR: the new address only, approved by the central approver.
	approved := d.approvedServingCSRs(t)
	i := slices.IndexFunc(approved, func(c certv1.CertificateSigningRequest) bool { return slices.Contains(csrIPs(&c), newIP6) })
	if i < 0 {
		t.Fatalf("no approved kubelet-serving CSR names %s", newIP6)
	}
	csr := approved[i]
	if ips := csrIPs(&csr); !reflect.DeepEqual(ips, []string{newIP6}) {
		t.Errorf("the kubelet's new CSR %s asks for IP SANs %v, want [%s]", csr.Name, ips, newIP6)
	}
	d.waitApprovedEvent(t, csr.Name)
	serving := d.servingIPs(newIP6)
	if !slices.Contains(serving, newIP6) {
		t.Errorf("the kubelet at [%s]:10250 presents IP SANs %v", newIP6, serving)
	}
	if n := len(d.proxy.Exits()) - exits; n != 1 {
		t.Errorf("kube-proxy restarted %d times during the renumbering, want 1 (its exits: %v)", n, d.proxy.ExitReasons())
	}
	d.agentUnchanged(t)
	report(t, "new prefix→%s usable %s; deprecation→kernel %s, →logs+exec over IPv6 %s (%s); CSR %s IP SANs %v; kube-proxy exited %s (restarts 1), IPv6 NodePort on the new address %s, refused on the old; withdrawal→old address gone %s; Node writes: %d status (with the record), %d other",
		newIP6, usable.Round(10*time.Millisecond), deprecated.Round(time.Millisecond), working.Round(10*time.Millisecond), times,
		csr.Name, csrIPs(&csr), times.proxyExit.Round(10*time.Millisecond), times.nodePort.Round(10*time.Millisecond),
		gone.Round(100*time.Millisecond), status, other)
}

// writeCounts counts the agent's successful writes to its Node by subresource ("" or "status").
func (d *day6) writeCounts() map[string]int {
	out := map[string]int{}
	for _, r := range d.agentWrites() {
		out[r.ObjectRef.Subresource]++
	}
	return out
}

// podIP6 returns the pod's IPv6 address, "" if it has none.
func podIP6(p *corev1.Pod) string {
	for _, ip := range p.Status.PodIPs {
		if a, err := netip.ParseAddr(ip.IP); err == nil && a.Is6() && !a.Is4In6() {
			return ip.IP
		}
	}
	return ""
}

// stamps formats times for a log line.
func stamps(ts []time.Time) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.UTC().Format(time.StampMilli))
	}
	return out
}
