package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// The approval attacks' other party: another Node (API only, no kubelet).
const (
	otherNode, otherIP = "rn-other", "192.0.2.77"
	csrPolicy          = "nodeaddr-kubelet-serving-csr"
	csrPending         = "KubeletServingCSRPending"
)

// servingCSR is a kubelet-serving request of node's identity for ips.
type servingCSR struct {
	node      string
	ips       []string
	clientFor func(string, ...string) kubernetes.Interface
}

func (s servingCSR) file(t *testing.T, name string) {
	t.Helper()
	csr, err := harness.ServingCSR{Node: s.node, IPs: s.ips}.Object(name)
	if err != nil {
		t.Fatal(err)
	}
	// Filed with the node's own kubelet identity: a client certificate minted from the cluster's CA.
	_, err = s.clientFor("system:node:"+s.node, "system:nodes").CertificatesV1().CertificateSigningRequests().Create(context.Background(),
		csr, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("file CSR %s as system:node:%s: %v", name, s.node, err)
	}
}

// attacks: on the real node, with the central approver deployed from deploy/ deciding, an attack
// CSR filed with the node's own kubelet identity (a client certificate of the cluster's CA) stays
// pending with a Warning from the approver naming its rule, also after that identity wrote another
// Node's address into its own Node's status (NodeRestriction lets it); another Node's CSR is not
// touched. The agent's own token (bound to its pod) holds no CSR right: RBAC refuses it approving
// another Node's CSR, approving its own Node's, and denying any. The approver's token (bound to its
// leader's pod) may approve, but its policy refuses it denying. Which SANs and usages the rules
// refuse is the rules' table (internal/csrapproval/rules/rulestest) and test/csr's attack corpus:
// a line here is a CSR the tokens' checks need, or a fact only this cluster gives.
func (d *day) attacks(t *testing.T, own string) {
	d.t = t
	ctx := context.Background()
	d.otherParties(t)
	self := d.node.Name
	d.fileCSR(t, "other-node-serving", servingCSR{node: otherNode, ips: []string{otherIP}})
	// The kubelet's identity writes the other Node's address into its own Node's status, as
	// NodeRestriction allows (an ExternalIP: whether nodeaddr keeps it or not, the address is
	// another Node's).
	n := d.node.Node(t)
	n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: otherIP})
	if _, err := d.c.ClientFor("system:node:"+self, "system:nodes").CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("the kubelet's identity writes %s into its Node's status: %v", otherIP, err)
	}
	attacks := []struct {
		name, reason string
		spec         servingCSR
	}{
		// The CSR of its own Node the agent's and the approver's tokens try to approve and deny below.
		{"attack-ip-not-the-nodes", "IPNotPublished", servingCSR{ips: []string{own, "192.0.2.99"}}},
		// The address the kubelet's identity wrote into its own Node's status above is another Node's.
		{"attack-other-nodes-ip", "IPOfAnotherNode", servingCSR{ips: []string{own, otherIP}}},
	}
	var reasons []string
	for _, a := range attacks {
		a.spec.node = self
		d.fileCSR(t, a.name, a.spec)
		ev := d.waitPendingEvent(t, a.name)
		if ev.Type != corev1.EventTypeWarning || !strings.Contains(ev.Message, "("+a.reason+")") {
			t.Errorf("%s: Event %s %q, want a Warning with (%s)", a.name, ev.Type, ev.Message, a.reason)
		}
		if c := d.csr(t, a.name).Status.Conditions; len(c) != 0 {
			t.Errorf("%s: conditions %+v, want none (pending)", a.name, c)
		}
		reasons = append(reasons, a.reason)
	}
	if c := d.csr(t, "other-node-serving").Status.Conditions; len(c) != 0 {
		t.Errorf("the other Node's CSR has conditions %+v", c)
	}
	agent := d.podClient(t, d.agentPod())
	err := harness.SetCSRCondition(ctx, agent, d.csr(t, "other-node-serving"), certv1.CertificateApproved)
	expectRBACDenial(t, "the agent approves the other Node's CSR", err)
	// What the agents could do before the approval moved to one approver: approve a CSR of their
	// own Node, whatever its SANs (admission cannot read them).
	err = harness.SetCSRCondition(ctx, agent, d.csr(t, "attack-ip-not-the-nodes"), certv1.CertificateApproved)
	expectRBACDenial(t, "the agent approves its own Node's CSR", err)
	for _, name := range []string{"attack-ip-not-the-nodes", "other-node-serving"} {
		expectRBACDenial(t, "the agent denies "+name, harness.SetCSRCondition(ctx, agent, d.csr(t, name), certv1.CertificateDenied))
	}
	approver := d.podClient(t, d.approverLeader(t))
	for _, name := range []string{"attack-ip-not-the-nodes", "other-node-serving"} {
		expectCSRPolicyDenial(t, "the approver's token denies "+name, harness.SetCSRCondition(ctx, approver, d.csr(t, name), certv1.CertificateDenied))
	}
	names := []string{"other-node-serving"}
	for _, a := range attacks {
		names = append(names, a.name)
	}
	for _, name := range names {
		if c := d.csr(t, name).Status.Conditions; len(c) != 0 {
			t.Errorf("%s: conditions %+v after the refused requests, want none", name, c)
		}
	}
	report(t, "left pending with Warnings from %s %v; the other Node's CSR untouched; the agent's token: approve another's 403, approve its own 403, deny 403 (RBAC); the approver's token: deny 403 (policy)",
		approverComponent, reasons)
}

// approverLeader is the approver's pod holding the Lease.
func (d *day) approverLeader(t *testing.T) *corev1.Pod {
	t.Helper()
	lease, err := d.c.CP.Admin.CoordinationV1().Leases("kube-system").Get(context.Background(), approverName, metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil {
		t.Fatalf("the approver's Lease: %v", err)
	}
	holder, _, _ := strings.Cut(*lease.Spec.HolderIdentity, "_")
	for _, p := range d.approverPods() {
		if p.Name == holder {
			return &p
		}
	}
	t.Fatalf("no approver pod %s holds the Lease", holder)
	return nil
}

// otherParties creates another Node with its InternalIP, and removes it when t ends.
func (d *day) otherParties(t *testing.T) {
	ctx := context.Background()
	cs := d.c.CP.Admin
	on, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: otherNode}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.CoreV1().Nodes().Delete(context.Background(), otherNode, metav1.DeleteOptions{}) })
	// kube-controller-manager writes a new Node too (its pod CIDR, taints): retry on its conflict
	// with the Node as it is now (a CI run failed here with "the object has been modified").
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		on.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: otherIP}}
		_, err := cs.CoreV1().Nodes().UpdateStatus(ctx, on, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			if fresh, gerr := cs.CoreV1().Nodes().Get(ctx, otherNode, metav1.GetOptions{}); gerr == nil {
				on = fresh
			}
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func (d *day) fileCSR(t *testing.T, name string, s servingCSR) {
	t.Helper()
	s.clientFor = d.c.ClientFor
	s.file(t, name)
}

func (d *day) csr(t *testing.T, name string) *certv1.CertificateSigningRequest {
	t.Helper()
	csr, err := d.c.CP.Admin.CertificatesV1().CertificateSigningRequests().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return csr
}

// waitPendingEvent waits for the approver's pending Event about CSR name on the node.
func (d *day) waitPendingEvent(t *testing.T, name string) corev1.Event {
	t.Helper()
	return d.waitNodeEvent(t, csrPending, name)
}

// podClient is a client with the token of p's ServiceAccount bound to p, as the kubelet mounts it
// (an agent's carries its node's name).
func (d *day) podClient(t *testing.T, p *corev1.Pod) kubernetes.Interface {
	t.Helper()
	if p == nil {
		t.Fatal("no pod")
	}
	exp := int64(600)
	tr, err := d.c.CP.Admin.CoreV1().ServiceAccounts(p.Namespace).CreateToken(context.Background(), p.Spec.ServiceAccountName,
		&authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: &exp,
			BoundObjectRef: &authnv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: p.Name, UID: p.UID}}},
		metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: d.c.CP.Config.Host, BearerToken: tr.Status.Token,
		TLSClientConfig: rest.TLSClientConfig{CAFile: d.c.CP.CAFile}})
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// expectCSRPolicyDenial checks that err is a 403 from nodeaddr's CSR policy, not RBAC's.
func expectCSRPolicyDenial(t *testing.T, what string, err error) {
	t.Helper()
	if _, ok := harness.DeniedByPolicy(err, csrPolicy); !ok {
		t.Errorf("%s: %v, want 403 from ValidatingAdmissionPolicy %s", what, err, csrPolicy)
	}
}

// expectRBACDenial checks that err is RBAC's 403 on the approval subresource (the request never
// reached admission).
func expectRBACDenial(t *testing.T, what string, err error) {
	t.Helper()
	if !apierrors.IsForbidden(err) || strings.Contains(err.Error(), "ValidatingAdmissionPolicy") ||
		!strings.Contains(err.Error(), `cannot update resource "certificatesigningrequests/approval"`) {
		t.Errorf("%s: %v, want RBAC's 403 (no right to update certificatesigningrequests/approval)", what, err)
	}
}

// contrast: the central approver scaled to zero replicas (as an operator stopping it would), the
// node renumbered from from to to, make-before-break: kubectl logs fails with an x509 error for
// failBound while the kubelet's new CSR stays pending; the test then approves it and logs and exec
// work again, so the failure was the missing approval and nothing else.
func (d *day) contrast(t *testing.T, from, to string) {
	d.t = t
	d.kubectlAdmin("-n", "kube-system", "scale", "deployment/"+approverName, "--replicas=0")
	harness.Eventually(d.t, 2*time.Minute, 100*time.Millisecond, "no approver pod left", func() (bool, string) {
		pods := d.approverPods()
		return len(pods) == 0, fmt.Sprintf("%d approver pods", len(pods))
	})
	harness.Eventually(d.t, time.Minute, 100*time.Millisecond, "kubectl logs and exec working before the renumbering", func() (bool, string) { err := d.works(); return err == nil, fmt.Sprint(err) })
	moved := time.Now()
	d.ns.IP("addr", "add", to+"/24", "dev", "eth0")
	d.ns.IP("addr", "del", from+"/24", "dev", "eth0")
	d.waitAddresses(withV4(d.node.Name, to))
	attempts, first := 0, ""
	for time.Since(moved) < failBound { // measured window: kubectl logs must fail for failBound
		out, err := d.tryKubectl("logs", "--tail=1", d.web)
		attempts++
		if err == nil {
			t.Fatalf("kubectl logs worked %s after the renumbering with no approver", time.Since(moved).Round(time.Second))
		}
		if !strings.Contains(out, "x509") {
			t.Fatalf("kubectl logs failed without an x509 error: %s", out)
		}
		if first == "" {
			_, first, _ = strings.Cut(strings.TrimSpace(out), "tls: ")
		}
		time.Sleep(2 * time.Second) // measured window: one attempt every 2 s
	}
	pending, filed := d.pendingKubeletCSR(t, to, moved)
	d.staleCert(t, from, to, pending.Name) // kubectl nodeaddr stale lists the certificate (day_plugin_test.go)
	harness.SetCSRCondition(context.Background(), d.c.CP.Admin, pending, certv1.CertificateApproved)
	approved := time.Now()
	harness.Eventually(d.t, 2*time.Minute, 100*time.Millisecond, "kubectl logs and exec working once the test approved", func() (bool, string) { err := d.works(); return err == nil, fmt.Sprint(err) })
	d.staleCert(t, from, to, "") // and no longer
	report(t, "approver scaled to 0: kubectl logs failed with x509 for %s (%d attempts: %q), the kubelet's CSR filed %s after the move and left pending; approved by the test → logs+exec working after %s",
		failBound, attempts, first, filed.Round(100*time.Millisecond), time.Since(approved).Round(100*time.Millisecond))
}

// pendingKubeletCSR waits for the kubelet's pending CSR naming ip and returns it with the time from
// moved to its creation. The kubelet files it within seconds of seeing the Node's new addresses;
// once its certificate manager's backoff is spent on requests nobody signed it retries only every
// 32 s, so the wait allows 3 minutes. When it ends empty-handed it prints the node's kubelet CSRs
// and the kubelet's certificate manager log lines.
func (d *day) pendingKubeletCSR(t *testing.T, ip string, moved time.Time) (*certv1.CertificateSigningRequest, time.Duration) {
	t.Helper()
	var seen []string
	var pending *certv1.CertificateSigningRequest
	if harness.Poll(3*time.Minute, time.Second, "a pending kubelet CSR for "+ip, func() (bool, string) {
		list, err := d.c.CP.Admin.CertificatesV1().CertificateSigningRequests().List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		seen = seen[:0]
		for i, csr := range list.Items {
			if csr.Spec.Username != "system:node:"+d.node.Name {
				continue
			}
			seen = append(seen, fmt.Sprintf("%s created %s IPs %v conditions %d", csr.Name,
				csr.CreationTimestamp.UTC().Format(time.RFC3339), csrIPs(&csr), len(csr.Status.Conditions)))
			if slices.Contains(csrIPs(&csr), ip) && len(csr.Status.Conditions) == 0 {
				pending = &list.Items[i]
				return true, ""
			}
		}
		return false, strings.Join(seen, "; ")
	}) == nil {
		return pending, pending.CreationTimestamp.Sub(moved)
	}
	var lines []string
	if f, err := os.ReadFile(filepath.Join(d.node.Dir, "kubelet.log")); err == nil {
		for _, l := range strings.Split(string(f), "\n") {
			if strings.Contains(l, "ertificate") || strings.Contains(l, "CSR") {
				lines = append(lines, l)
			}
		}
	}
	t.Fatalf("no pending kubelet CSR for %s 3m after the failures ended (moved at %s); the node's CSRs:\n%s\nthe kubelet's certificate lines:\n%s",
		ip, moved.UTC().Format(time.RFC3339), strings.Join(seen, "\n"), strings.Join(lines[max(0, len(lines)-60):], "\n"))
	return nil, 0
}
