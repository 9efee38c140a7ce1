package csr

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/pem"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// attack is one line of the attack corpus: a CSR the approver must leave pending (no condition)
// with a Warning Event naming reason on the requester's Node, whether node-a is honest or its
// kubelet and agent token are both the attacker's.
type attack struct {
	name   string // the case
	csr    string // its CSR's name, after the mode's prefix
	reason string // the rule the approver names; "" when it must not even look at the CSR
	spec   csrSpec
	by     requester // node-a's kubelet when zero
	// setup runs before the CSR is filed, in both modes.
	setup func(t *testing.T, w *world)
	// refused: the API server refuses to create the CSR (the approver never sees it), with an
	// error containing this.
	refused string
}

func (a attack) requester() requester {
	if a.by.user == "" {
		return kubeletOf(self)
	}
	return a.by
}

var (
	serving = []certv1.KeyUsage{certv1.UsageDigitalSignature, certv1.UsageKeyEncipherment, certv1.UsageServerAuth}
	// filer and mallory may create CSRs (system:node-bootstrapper) but are no kubelet.
	nodeNameNoGroup = requester{"system:node:" + self, []string{filersGroup, "system:authenticated"}}
	mallory         = requester{"mallory", []string{filersGroup, "system:authenticated"}}
)

// attacks is the corpus: one line per thing only a real API server shows about an attack. What a
// CSR's own content decides (usages, subject, SAN kinds and count, loopback and link-local IPs,
// in-cluster and foreign DNS names, wildcards) is a line of the rules' table
// (internal/csrapproval/rules/rulestest), which TestDecide and the plugin's advice run; a line here
// is one of:
//   - who asks: spec.username and spec.groups are what the API server authenticated, never what the
//     client claims, and RBAC lets a non-kubelet (system:node-bootstrapper) file CSRs;
//   - what the API server's validation lets through to the approver, or refuses itself;
//   - a fact the approver reads from real objects through its informers and its RBAC (its own
//     Node's record and status, another Node's name, DNS entry and IP, the kubernetes Service's
//     ClusterIP and EndpointSlice, the ServiceCIDR object) or, in the compromised mode, the same
//     facts poisoned with the node's own credentials;
//   - a flag of the real binary;
//   - the informer's field selector on the signer.
func attacks(clusterIP string) []attack {
	return []attack{
		// Who asks: the API server's authentication, not the request, names the requester.
		{name: "requester named system:node:node-a but not in group system:nodes", csr: "not-node-group", reason: "NotNodeGroup", by: nodeNameNoGroup},
		{name: "non-node user files for the kubelet-serving signer (no Node: ignored, no Event)", csr: "non-node-user", by: mallory},
		{name: "node-b's kubelet files with node-a's CN and SANs (Event on node-b)", csr: "other-requester-our-cn", reason: "SubjectMismatch",
			by: kubeletOf(other), spec: csrSpec{cn: "system:node:" + self, dns: []string{self}, ips: []string{selfIP}}},

		// What the API server's validation lets through, and what it refuses itself.
		{name: "a second PEM block smuggles a request for node-b (admitted by the API server)", csr: "second-pem-block", reason: "MalformedRequest",
			spec: csrSpec{mangle: func(t *testing.T, req []byte) []byte {
				smuggled := csrSpec{dns: []string{other}, ips: []string{otherIP}}.object(t, "smuggled", other)
				return append(req, smuggled.Spec.Request...)
			}}},
		{name: "request whose signature does not verify (refused by the API server's validation)", csr: "bad-signature",
			refused: "signature", spec: csrSpec{mangle: breakSignature}},

		// Facts from real objects: other Nodes.
		{name: "DNS SAN of another Node's name (the Node object; compromised node-a lists it too)", csr: "dns-other-node", reason: "DNSNameOfAnotherNode",
			spec: csrSpec{dns: []string{self, other}}},
		{name: "DNS SAN of another Node's InternalDNS entry", csr: "dns-other-node-entry", reason: "DNSNameOfAnotherNode", spec: csrSpec{dns: []string{self, otherDNS}}},
		{name: "IP SAN of another Node beside the own (k0s: every SAN must be the node's; compromised: recorded by node-a too)", csr: "ip-other-node", reason: "IPOfAnotherNode",
			spec: csrSpec{ips: []string{selfIP, otherIP}}},

		// Facts from real objects: the API server and the Service network.
		{name: "IP SAN of the API server endpoint (the kubernetes EndpointSlice)", csr: "ip-apiserver-endpoint", reason: "IPOfAPIServer",
			spec: csrSpec{ips: []string{selfIP, apiServerIP}}},
		{name: "IP SAN of the kubernetes ClusterIP (the Service; compromised: recorded as InternalIP)", csr: "ip-cluster-ip", reason: "IPOfAPIServer",
			spec: csrSpec{ips: []string{selfIP, clusterIP}}},
		{name: "IP SAN inside the Service CIDR (the ServiceCIDR object)", csr: "ip-service-cidr", reason: "IPInServiceCIDR", spec: csrSpec{ips: []string{selfIP, serviceIP}}},

		// Facts from real objects: node-a's record, which only its agent writes.
		{name: "IP SAN not published anywhere", csr: "ip-not-published", reason: "IPNotPublished", spec: csrSpec{ips: []string{selfIP, "192.0.2.97"}}},
		{name: "IP SAN the kubelet wrote into its Node's status, not in the record", csr: "ip-kubelet-status", reason: "IPNotPublished",
			spec: csrSpec{ips: []string{selfIP, "192.0.2.99"}},
			setup: func(t *testing.T, w *world) {
				w.kubeletAddsStatus(t, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "192.0.2.99"})
			}},

		// The real binary's flags reach the rules: --max-sans's default, --allowed-ip-prefixes.
		{name: "eleven SANs, the node's own, over the default --max-sans of ten", csr: "eleven-sans", reason: "TooManySANs",
			spec: csrSpec{dns: []string{self}, ips: []string{selfIP, selfIP6, selfIP, selfIP6, selfIP, selfIP6, selfIP, selfIP6, selfIP, selfIP6}}},
		{name: "IP SAN outside --allowed-ip-prefixes (compromised: recorded by the agent token)", csr: "ip-not-allowed", reason: "IPNotAllowed",
			spec: csrSpec{ips: []string{selfIP, outsideIP}}},

		// Other signers never reach the approver: its informer's field selector.
		{name: "deckhouse approved any signer: a custom signer with node-a's serving SANs (ignored, no Event)", csr: "other-signer-custom",
			spec: csrSpec{signer: "example.com/node-serving", usages: serving}},
	}
}

// breakSignature flips the last bit of the request's signature.
func breakSignature(t *testing.T, req []byte) []byte {
	block, _ := pem.Decode(req)
	if block == nil {
		t.Fatal("no PEM block")
	}
	block.Bytes[len(block.Bytes)-1] ^= 1
	return pem.EncodeToMemory(block)
}

// TestCentralApprover runs the approver against the attack corpus and the kubelets it must serve.
func TestCentralApprover(t *testing.T) {
	w := newWorld(t)

	// The approver's metric families are those of the golden file that test/alerts checks the
	// alert rules and the dashboard against.
	t.Run("approval metrics match the golden file", func(t *testing.T) { checkApprovalGolden(t, w.approver) })

	t.Run("legitimate CSRs are approved", func(t *testing.T) { testApprovals(t, w) })

	t.Run("back-to-back renumberings: CSRs filed 0 to 0.9 s after the status are approved, nothing reported pending", func(t *testing.T) {
		testRenumberings(t, w)
	})

	table := attacks(w.clusterIP)
	t.Run("attacks of an honest node's kubelet are left pending", func(t *testing.T) { w.runMode(t, "honest-", table, false) })

	t.Run("floods", func(t *testing.T) { testFloods(t, w) })

	// Informers, not requests per CSR: whatever was filed so far (hundreds of CSRs), each approver
	// process read each resource with one streaming watch, read no CSR by itself, and wrote one
	// approval per approved CSR.
	t.Run("the approver's requests", func(t *testing.T) { checkApproverRequests(t, w) })

	// The attacker owns node-a: its kubelet's identity and its agent's token (the agent process is
	// stopped; its token writes what the attacker likes, within the base admission policy).
	if code := w.agent.Stop(); code != 0 {
		t.Fatalf("agent exited %d", code)
	}
	t.Run("compromised node-a poisons its Node", func(t *testing.T) { w.poison(t) })
	t.Run("attacks of a compromised node (kubelet and agent token) are left pending", func(t *testing.T) {
		w.runMode(t, "compromised-", table, true)
	})

	// What the record cannot prevent: the agent's token is the root of trust for its own Node.
	t.Run("limits of the record", func(t *testing.T) {
		t.Run("an unused address the compromised agent records, in the allowed prefixes and nobody else's, is approved", func(t *testing.T) {
			w.agentPublishes(t, selfIP, "192.0.2.98")
			before := w.metrics(t)
			if _, err := w.file(t, kubeletOf(self), "compromised-unused-recorded-address", csrSpec{ips: []string{"192.0.2.98"}}); err != nil {
				t.Fatal(err)
			}
			w.expectApproved(t, self, "compromised-unused-recorded-address", "[192.0.2.10 192.0.2.98]", before)
		})
		t.Run("node-b's own CSR while node-a squats node-b's IP is left pending, approved for neither", func(t *testing.T) {
			w.agentPublishes(t, selfIP, otherIP)
			before := w.metrics(t)
			if _, err := w.file(t, kubeletOf(other), "node-b-while-squatted", csrSpec{ips: []string{otherIP}}); err != nil {
				t.Fatal(err)
			}
			w.expectPending(t, other, "node-b-while-squatted", "IPOfAnotherNode", before)
		})
	})
}

// testApprovals: the CSRs of kubelets as distributions configure them, each approved.
func testApprovals(t *testing.T, w *world) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	dual := "[" + selfIP + " " + selfIP6 + "]"
	// One line per thing only a real API server shows: the approval goes through the component's
	// admission policy, the key's signature is the one the API server validated (RSA here, ECDSA in
	// the others), the record is the real agent's (both families), the allowed suffix is the real
	// binary's flag. Which SAN sets and usages a kubelet's CSR may carry is the rules' table
	// (rulestest: "the kubelet's own request", "DNS name in upper case", ...).
	lines := []struct {
		name, csr string
		spec      csrSpec
	}{
		{"kubeadm kubelet: node name and InternalIP, RSA key", "kubeadm", csrSpec{dns: []string{self}, ips: []string{selfIP}, key: rsaKey, usages: serving}},
		{"k3s kubelet with --node-name=node-a (the kubelet's --hostname-override), dual-stack", "k3s-dual-stack", csrSpec{dns: []string{self}, ips: []string{selfIP, selfIP6}}},
		{"DNS SAN under an allowed suffix beside the node's name", "allowed-dns-suffix", csrSpec{dns: []string{self, self + "." + dnsSuffix}, ips: []string{selfIP}}},
	}
	for _, l := range lines {
		t.Run(l.name, func(t *testing.T) {
			before := w.metrics(t)
			if _, err := w.file(t, kubeletOf(self), l.csr, l.spec); err != nil {
				t.Fatal(err)
			}
			w.expectApproved(t, self, l.csr, dual, before)
		})
	}

	// The kubelet files its first CSR at registration, before its Node exists: left pending
	// (NodeUnknown) until the kubelet registers the Node, then approved.
	t.Run("first CSR at registration, DNS-only, approved once the Node exists", func(t *testing.T) {
		const node = "node-c"
		before := w.metrics(t)
		if _, err := w.file(t, kubeletOf(node), "registration", csrSpec{dns: []string{node}, ips: []string{}}); err != nil {
			t.Fatal(err)
		}
		w.expectPending(t, node, "registration", "NodeUnknown", before)
		before = w.metrics(t)
		if _, err := w.as(t, kubeletOf(node)).CoreV1().Nodes().Create(context.Background(),
			&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("kubelet registers %s: %v", node, err)
		}
		w.expectApproved(t, node, "registration", "[]", before)
	})

	// The kubelet's --node-ip is a secondary address of the uplink, not the route source: the agent
	// publishes it (the cloud node controller's rule) and records it, its nodeaddr_address_info
	// shows it (what the Node carries, not the route source), and the kubelet's CSR for it is
	// approved.
	t.Run("provided-node-ip: the kubelet's --node-ip, a secondary address of the uplink", func(t *testing.T) {
		const provided = "192.0.2.11"
		w.h.NS.IP("addr", "add", provided+"/24", "dev", "eth0")
		if err := patchNode(w.as(t, kubeletOf(self)), self, "", map[string]any{
			"metadata": map[string]any{"annotations": map[string]any{providedNodeIPAn: provided}}}); err != nil {
			t.Fatalf("kubelet annotates its Node: %v", err)
		}
		w.waitRecord(t, provided)
		w.expectAddressInfo(t, provided)
		before := w.metrics(t)
		if _, err := w.file(t, kubeletOf(self), "provided-node-ip", csrSpec{ips: []string{provided}}); err != nil {
			t.Fatal(err)
		}
		w.expectApproved(t, self, "provided-node-ip", "["+provided+"]", before)
		// Back to the world's addresses.
		if err := patchNode(w.as(t, kubeletOf(self)), self, "", map[string]any{
			"metadata": map[string]any{"annotations": map[string]any{providedNodeIPAn: nil}}}); err != nil {
			t.Fatal(err)
		}
		w.h.NS.IP("addr", "del", provided+"/24", "dev", "eth0")
		w.waitRecord(t, baselineRecord)
		w.expectAddressInfo(t, selfIP, selfIP6)
	})
}

// expectAddressInfo checks that the agent's nodeaddr_address_info lists exactly ips as InternalIPs:
// those its Node carries (waitRecord saw them there; the agent's gauge reads the addresses it
// writes, so it shows them by then).
func (w *world) expectAddressInfo(t *testing.T, ips ...string) {
	t.Helper()
	m, err := w.agent.Metrics()
	if err != nil {
		t.Fatalf("scrape agent: %v", err)
	}
	var got, want []string
	for k, v := range m {
		if strings.HasPrefix(k, "nodeaddr_address_info{") && v == 1 {
			got = append(got, k)
		}
	}
	for _, ip := range ips {
		family := "IPv4"
		if strings.Contains(ip, ":") {
			family = "IPv6"
		}
		want = append(want, fmt.Sprintf(`nodeaddr_address_info{address=%q,family=%q,type="InternalIP"}`, ip, family))
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("agent's nodeaddr_address_info %v, want what the Node carries: %v", got, want)
	}
}

// runMode runs the table in a mode, 20 lines per approver process.
func (w *world) runMode(t *testing.T, mode string, table []attack, compromised bool) {
	const chunk = 20
	for start := 0; start < len(table); start += chunk {
		lines := table[start:min(start+chunk, len(table))]
		w.freshApprover(t)
		for _, a := range lines {
			t.Run(a.name, func(t *testing.T) { w.runAttack(t, mode, a, compromised) })
		}
		w.checkStillPending(t, mode, lines)
	}
}

// runAttack files the line's CSR in a mode (the CSR's name prefix) and checks it is left pending;
// compromised, the attacker also tries to approve it with the agent's token and to record its IPs
// as the kubelet.
func (w *world) runAttack(t *testing.T, mode string, a attack, compromised bool) {
	name := mode + a.csr
	if a.setup != nil {
		a.setup(t, w)
	}
	before := w.metrics(t)
	created, err := w.file(t, a.requester(), name, a.spec)
	if a.refused != "" {
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), a.refused) {
			t.Fatalf("create: %v, want 422 saying %q", err, a.refused)
		}
		return
	}
	if err != nil {
		t.Fatalf("%s files %s: %v", a.requester().user, name, err)
	}
	if compromised {
		err := harness.SetCSRCondition(context.Background(), w.agentCS, created, certv1.CertificateApproved)
		expectRBACDenial(t, err, `cannot update resource "certificatesigningrequests/approval"`)
		ips := append([]string{selfIP}, a.spec.ips...)
		err = patchNode(w.as(t, kubeletOf(self)), self, "", map[string]any{
			"metadata": map[string]any{"annotations": map[string]any{recordKey: strings.Join(ips, ",")}}})
		expectDenied(t, err, recordPolicy, "may not create, change or remove the annotation "+recordKey)
	}
	if a.reason == "" {
		return // ignored: checkStillPending looks once the mode's later lines were decided
	}
	node := a.requester().node()
	w.expectPending(t, node, name, a.reason, before)
}

// checkStillPending: after every line of a mode, none of its CSRs has a condition, and no Event
// names those the approver must ignore.
func (w *world) checkStillPending(t *testing.T, mode string, table []attack) {
	t.Run("still pending: "+table[0].csr+" to "+table[len(table)-1].csr, func(t *testing.T) {
		for _, a := range table {
			if a.refused != "" {
				continue
			}
			if c := w.csr(t, mode+a.csr).Status.Conditions; len(c) != 0 {
				t.Errorf("%s: conditions %+v", mode+a.csr, c)
			}
			if a.reason == "" {
				if evs := w.eventsNaming(t, mode+a.csr); len(evs) != 0 {
					t.Errorf("%s: Events %+v, want none (the approver ignores it)", mode+a.csr, evs)
				}
			}
		}
	})
}

// kubeletAddsStatus: node-a's kubelet adds addresses to its Node's status (NodeRestriction lets a
// kubelet write its own Node's status).
func (w *world) kubeletAddsStatus(t *testing.T, addrs ...corev1.NodeAddress) {
	t.Helper()
	n := w.cp.Node(t, self)
	for _, a := range addrs {
		if !containsAddr(n.Status.Addresses, a) {
			n.Status.Addresses = append(n.Status.Addresses, a)
		}
	}
	if _, err := w.as(t, kubeletOf(self)).CoreV1().Nodes().UpdateStatus(context.Background(), n, metav1.UpdateOptions{FieldManager: "kubelet"}); err != nil {
		t.Fatalf("kubelet writes %v into its Node's status: %v", addrs, err)
	}
}

func containsAddr(list []corev1.NodeAddress, a corev1.NodeAddress) bool {
	for _, b := range list {
		if a == b {
			return true
		}
	}
	return false
}

// agentPublishes writes ips with node-a's agent token as its InternalIPs and its record, as the
// agent would (the other status entries kept, in place).
func (w *world) agentPublishes(t *testing.T, ips ...string) {
	t.Helper()
	n := w.cp.Node(t, self)
	var addrs []corev1.NodeAddress
	for _, ip := range ips {
		addrs = append(addrs, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
	}
	for _, a := range n.Status.Addresses {
		if a.Type != corev1.NodeInternalIP && a.Type != corev1.NodeExternalIP {
			addrs = append(addrs, a)
		}
	}
	if err := patchNode(w.agentCS, self, "status", map[string]any{"status": map[string]any{"addresses": addrs}}); err != nil {
		t.Fatalf("agent token publishes %v: %v", ips, err)
	}
	if err := patchNode(w.agentCS, self, "", map[string]any{
		"metadata": map[string]any{"annotations": map[string]any{recordKey: strings.Join(ips, ",")}}}); err != nil {
		t.Fatalf("agent token records %v: %v", ips, err)
	}
}

// poison: with the agent's token the attacker publishes and records, on node-a, node-b's IP, the
// kubernetes ClusterIP, the API server's endpoint, an address in the Service CIDR and one outside
// the allowed prefixes (the base admission policy admits each: none is special-purpose); as the
// kubelet it adds an unrecorded ExternalIP, node-b's IP, the ClusterIP, an in-cluster name and
// node-b's name to the status, and cannot write the record.
func (w *world) poison(t *testing.T) {
	recorded := []string{selfIP, selfIP6, otherIP, w.clusterIP, apiServerIP, serviceIP, outsideIP}
	w.agentPublishes(t, recorded...)
	w.kubeletAddsStatus(t, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "192.0.2.99"},
		corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: otherIP}, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: w.clusterIP},
		corev1.NodeAddress{Type: corev1.NodeInternalDNS, Address: "kubernetes.default.svc"},
		corev1.NodeAddress{Type: corev1.NodeExternalDNS, Address: other})
	n := w.cp.Node(t, self)
	if got, want := n.Annotations[recordKey], strings.Join(recorded, ","); got != want {
		t.Errorf("record %q, want %q", got, want)
	}
	for _, sub := range []string{"", "status"} {
		n := w.cp.Node(t, self)
		n.Annotations[recordKey] = "192.0.2.99"
		var err error
		if sub == "" {
			_, err = w.as(t, kubeletOf(self)).CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{})
		} else {
			_, err = w.as(t, kubeletOf(self)).CoreV1().Nodes().UpdateStatus(context.Background(), n, metav1.UpdateOptions{})
		}
		expectDenied(t, err, recordPolicy, "system:node:"+self+" may not create, change or remove the annotation "+recordKey)
	}
}

// testFloods: CSRs by the hundred delay nobody else, nor the flooding node's next good CSR.
func testFloods(t *testing.T, w *world) {
	// k0s: a node filing CSRs whose names sort first blocked every other node's.
	t.Run("node-b floods CSRs whose names sort first; node-a's good CSR is approved", func(t *testing.T) {
		w.flood(t, kubeletOf(other), "0-node-b-flood-%03d", 200, csrSpec{dns: []string{other, "kubernetes"}, ips: []string{}})
		before := w.metrics(t)
		if _, err := w.file(t, kubeletOf(self), "node-a-beside-node-b-flood", csrSpec{ips: []string{selfIP, selfIP6}}); err != nil {
			t.Fatal(err)
		}
		w.expectApproved(t, self, "node-a-beside-node-b-flood", "["+selfIP+" "+selfIP6+"]", before)
	})
	// cluster-machine-approver stops approving past pending = machines + 100.
	t.Run("500 pending bad CSRs of node-a, then its good CSR is approved", func(t *testing.T) {
		newest := w.flood(t, kubeletOf(self), "node-a-flood-%03d", 500, csrSpec{ips: []string{selfIP, "192.0.2.97"}})
		// creationTimestamp has whole seconds: the good CSR comes a second after the flood's
		// newest, as a kubelet's next one would.
		time.Sleep(time.Until(newest.Add(time.Second))) // measured window: the next whole second
		before := w.metrics(t)
		if _, err := w.file(t, kubeletOf(self), "node-a-after-its-flood", csrSpec{ips: []string{selfIP}}); err != nil {
			t.Fatal(err)
		}
		w.expectApproved(t, self, "node-a-after-its-flood", "["+selfIP+" "+selfIP6+"]", before)
	})
}

// flood files n CSRs (names from format) as r, 16 at a time, and returns the newest's creation time.
func (w *world) flood(t *testing.T, r requester, format string, n int, s csrSpec) time.Time {
	t.Helper()
	var mu sync.Mutex
	var newest time.Time
	var firstErr error
	var wg sync.WaitGroup
	next := make(chan int)
	for range 16 {
		wg.Go(func() {
			for i := range next {
				c, err := w.file(t, r, fmt.Sprintf(format, i), s)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				} else if err == nil && c.CreationTimestamp.After(newest) {
					newest = c.CreationTimestamp.Time
				}
				mu.Unlock()
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	if firstErr != nil {
		t.Fatalf("flood: %v", firstErr)
	}
	return newest
}

// checkApproverRequests counts the approver's requests in the audit log: each process's informers
// watched each resource once, streaming the initial list (client-go's WatchList), and nothing
// else read CSRs, Nodes, the Service, its EndpointSlices or the ServiceCIDRs: no LIST at all, no
// GET; one approval per approved CSR.
func checkApproverRequests(t *testing.T, w *world) {
	evs, err := w.cp.AuditSince(harness.ApproverUser, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, e := range evs {
		if e.ObjectRef == nil {
			continue
		}
		r := e.ObjectRef.Resource
		if e.ObjectRef.Subresource != "" {
			r += "/" + e.ObjectRef.Subresource
		}
		switch {
		case e.Verb == "watch" && e.Stage == "ResponseStarted":
			if strings.Contains(e.RequestURI, "sendInitialEvents=true") {
				got["watch-list "+r]++
			} else {
				got["watch "+r]++
			}
		case e.Verb != "watch" && e.Stage == "ResponseComplete" && e.ResponseStatus != nil:
			got[fmt.Sprintf("%s %s %d", e.Verb, r, e.ResponseStatus.Code)]++
		}
	}
	w.mu.Lock()
	approved, starts := w.approved, w.starts
	w.mu.Unlock()
	want := map[string]int{"update certificatesigningrequests/approval 200": approved}
	for _, r := range []string{"certificatesigningrequests", "nodes", "services", "endpointslices", "servicecidrs"} {
		want["watch-list "+r] = starts
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%s: %d requests, want %d", k, got[k], n)
		}
	}
	for k, n := range got {
		if _, ok := want[k]; !ok && !strings.Contains(k, " events ") {
			t.Errorf("unexpected requests %s: %d", k, n)
		}
	}
	t.Logf("approver requests (%d processes, %d approvals): %v", starts, approved, got)
}

// testRenumberings: the kubelet files its serving CSR 0 to 0.9 s after the Node's addresses change
// (docs/renumbering.md). The agent renumbers twice, back to back, so that the second write comes
// when its --publish-rate budget is spent; the approval record travels in the status write itself,
// so every Node version that carries the new InternalIP carries its record, and the CSR filed at 0,
// 0.1, 0.5 or 0.9 s after that version is approved with no KubeletServingCSRPending Event and no
// pending count.
func testRenumberings(t *testing.T, w *world) {
	current := selfIP
	for i, delay := range []time.Duration{0, 100 * time.Millisecond, 500 * time.Millisecond, 900 * time.Millisecond} {
		first, second := fmt.Sprintf("192.0.2.%d", 20+i), fmt.Sprintf("192.0.2.%d", 30+i)
		name := fmt.Sprintf("renumbered-%dms", delay.Milliseconds())
		t.Run(name, func(t *testing.T) {
			w.renumber(t, current, first)
			current = first
			w.renumber(t, current, second) // at once: the agent's write budget is spent
			current = second
			before := w.metrics(t)
			time.Sleep(delay) // measured window: the kubelet's delay after the status change, which the case is about
			if _, err := w.file(t, kubeletOf(self), name, csrSpec{dns: []string{self}, ips: []string{second, selfIP6}}); err != nil {
				t.Fatal(err)
			}
			w.expectApproved(t, self, name, "["+second+" "+selfIP6+"]", before)
			if d := pendingDeltas(before, w.metrics(t)); len(d) != 0 {
				t.Errorf("pending counters grew by %v, want none", d)
			}
			for _, e := range w.eventsNaming(t, name) {
				if e.Reason != eventApproved {
					t.Errorf("Event %s %s: %s, want only %s", e.Type, e.Reason, e.Message, eventApproved)
				}
			}
		})
	}
	w.renumber(t, current, selfIP)
}

// renumber moves node-a's IPv4 address from one to another (add, then delete: the kernel promotes
// the new one) and returns when the Node lists it. Every Node version seen on the way lists in its
// status exactly the InternalIPs its approval record names.
func (w *world) renumber(t *testing.T, from, to string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nodes := w.cp.Admin.CoreV1().Nodes()
	n, err := nodes.Get(ctx, self, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	watch, err := nodes.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + self, ResourceVersion: n.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Stop()
	w.h.NS.IP("addr", "add", to+"/24", "dev", "eth0")
	w.h.NS.IP("addr", "del", from+"/24", "dev", "eth0")
	want := to + "," + selfIP6
	// A watch, not harness.Eventually: every Node version on the way must carry its record, and a
	// poll would see only some of them.
	last := "no Node version"
	for ev := range watch.ResultChan() {
		n, ok := ev.Object.(*corev1.Node)
		if !ok {
			continue
		}
		var ips []string
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				ips = append(ips, a.Address)
			}
		}
		got := strings.Join(ips, ",")
		last = fmt.Sprintf("version %s with InternalIPs %s", n.ResourceVersion, got)
		if got != n.Annotations[recordKey] {
			t.Errorf("Node version %s lists InternalIPs %s with the record %q", n.ResourceVersion, got, n.Annotations[recordKey])
		} else if got == want {
			return
		}
	}
	t.Fatalf("node-a does not list %s within 30s; last seen: %s", want, last)
}
