package csrapproval

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
)

// fakeCluster reads Nodes and EndpointSlices from a fake clientset.
type fakeCluster struct{ c *fake.Clientset }

func (f fakeCluster) ListNodes(ctx context.Context, o metav1.ListOptions) (*corev1.NodeList, error) {
	return f.c.CoreV1().Nodes().List(ctx, o)
}

func (f fakeCluster) ListEndpointSlices(ctx context.Context, ns string, o metav1.ListOptions) (*discoveryv1.EndpointSliceList, error) {
	return f.c.DiscoveryV1().EndpointSlices(ns).List(ctx, o)
}

type countingObserver struct {
	pending   []string
	approvals []time.Duration
}

func (c *countingObserver) OnCSRPending(r string)         { c.pending = append(c.pending, r) }
func (c *countingObserver) OnCSRApproved(d time.Duration) { c.approvals = append(c.approvals, d) }

func node(name string, addrs ...corev1.NodeAddress) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Addresses: addrs}}
}

// fixture: node-a publishes 10.0.0.5 and fd00::5 and is called node-a; node-b has 10.0.0.6; the API
// server is at 10.0.0.1.
func fixture(t *testing.T, csr *certv1.CertificateSigningRequest) (*Approver, *fake.Clientset, *record.FakeRecorder, *countingObserver) {
	t.Helper()
	self := node("node-a", corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.0.5"},
		corev1.NodeAddress{Type: corev1.NodeHostName, Address: "node-a"})
	other := node("node-b", corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.0.6"})
	ready := true
	eps := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "kubernetes", Namespace: "default",
			Labels: map[string]string{discoveryv1.LabelServiceName: "kubernetes"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
	}
	csr.Name = "csr-1"
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	csr.CreationTimestamp = metav1.NewTime(created)
	c := fake.NewClientset([]runtime.Object{self, other, eps, csr}...)
	rec := record.NewFakeRecorder(10)
	obs := &countingObserver{}
	a, err := New(Config{
		Node: "node-a", CSRs: c.CertificatesV1().CertificateSigningRequests(), Cluster: fakeCluster{c},
		Own: func() ([]netip.Addr, *corev1.Node) {
			return []netip.Addr{netip.MustParseAddr("10.0.0.5"), netip.MustParseAddr("fd00::5")}, self
		},
		Recorder: rec, Observer: obs, Now: func() time.Time { return created.Add(1500 * time.Millisecond) },
	})
	if err != nil {
		t.Fatal(err)
	}
	a.csrs[csr.Name] = csr
	c.ClearActions()
	return a, c, rec, obs
}

func events(rec *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// The Node's legitimate CSR is approved with one UpdateApproval, an Approved condition, a Normal
// Event and the latency from its creation.
func TestApproverApprovesOwnLegitimateCSR(t *testing.T) {
	a, c, rec, obs := fixture(t, build(t, csrSpec{}))
	if err := a.sync(context.Background(), "csr-1"); err != nil {
		t.Fatal(err)
	}
	var verbs []string
	for _, act := range c.Actions() {
		verbs = append(verbs, act.GetVerb()+" "+act.GetResource().Resource+"/"+act.GetSubresource())
	}
	want := []string{"list nodes/", "list endpointslices/", "update certificatesigningrequests/approval"}
	if strings.Join(verbs, ",") != strings.Join(want, ",") {
		t.Fatalf("actions %v, want %v", verbs, want)
	}
	got, err := c.CertificatesV1().CertificateSigningRequests().Get(context.Background(), "csr-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	conds := got.Status.Conditions
	if len(conds) != 1 || conds[0].Type != certv1.CertificateApproved || conds[0].Status != corev1.ConditionTrue ||
		conds[0].Reason != ApprovalReason || !strings.Contains(conds[0].Message, "[10.0.0.5 fd00::5]") {
		t.Errorf("conditions %+v", conds)
	}
	if ev := events(rec); len(ev) != 1 || !strings.HasPrefix(ev[0], "Normal "+EventApproved+" Kubelet serving CSR csr-1 approved") {
		t.Errorf("events %q", ev)
	}
	if len(obs.approvals) != 1 || obs.approvals[0] != 1500*time.Millisecond || len(obs.pending) != 0 {
		t.Errorf("observer %+v", obs)
	}
}

// A CSR of the Node that breaks a rule is left pending (no write at all: never denied), with one
// Warning Event and one count, however often it is examined.
func TestApproverLeavesBadCSRPendingAndSaysWhyOnce(t *testing.T) {
	for _, tc := range []struct {
		name   string
		spec   csrSpec
		reason string
	}{
		{"another Node's IP", csrSpec{ips: []string{"10.0.0.6"}}, ReasonIPOfAnotherNode},
		{"the API server's IP", csrSpec{ips: []string{"10.0.0.1"}}, ReasonIPOfAPIServer},
		{"an unpublished IP", csrSpec{ips: []string{"10.0.0.9"}}, ReasonIPNotPublished},
		{"a foreign DNS name", csrSpec{dns: []string{"node-b"}}, ReasonDNSNotNode},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, c, rec, obs := fixture(t, build(t, tc.spec))
			for range 3 {
				if err := a.sync(context.Background(), "csr-1"); err != nil {
					t.Fatal(err)
				}
			}
			for _, act := range c.Actions() {
				if act.GetVerb() != "list" {
					t.Errorf("unexpected write %s %s/%s", act.GetVerb(), act.GetResource().Resource, act.GetSubresource())
				}
			}
			ev := events(rec)
			if len(ev) != 1 || !strings.HasPrefix(ev[0], "Warning "+EventPending+" Kubelet serving CSR csr-1 left pending ("+tc.reason+")") {
				t.Errorf("events %q", ev)
			}
			if strings.Join(obs.pending, ",") != tc.reason || len(obs.approvals) != 0 {
				t.Errorf("observer %+v", obs)
			}
		})
	}
}

// CSRs that are not the Node's business cost no read and no write.
func TestApproverIgnoresOthersCSRs(t *testing.T) {
	for name, spec := range map[string]csrSpec{
		"another node's": {username: "system:node:node-b", cn: "system:node:node-b"},
		"another signer": {signer: certv1.KubeAPIServerClientKubeletSignerName},
		"already denied": {conditions: []certv1.RequestConditionType{certv1.CertificateDenied}},
	} {
		t.Run(name, func(t *testing.T) {
			a, c, rec, _ := fixture(t, build(t, spec))
			a.enqueue(a.csrs["csr-1"])
			if a.queue.Len() != 0 {
				t.Errorf("queued")
			}
			if err := a.sync(context.Background(), "csr-1"); err != nil {
				t.Fatal(err)
			}
			if acts := c.Actions(); len(acts) != 0 {
				t.Errorf("actions %v", acts)
			}
			if ev := events(rec); len(ev) != 0 {
				t.Errorf("events %q", ev)
			}
		})
	}
}

// A pending CSR is decided again only when the agent's own state changed since: a Node update
// that changes neither the published addresses nor the Node's names (a heartbeat) queues nothing;
// a new published address queues it, and the CSR asking for it is then approved.
func TestApproverReexaminesOnlyOnOwnStateChange(t *testing.T) {
	a, c, _, obs := fixture(t, build(t, csrSpec{ips: []string{"10.0.0.7"}}))
	if err := a.sync(context.Background(), "csr-1"); err != nil {
		t.Fatal(err)
	}
	if strings.Join(obs.pending, ",") != ReasonIPNotPublished {
		t.Fatalf("pending %v", obs.pending)
	}
	a.NodeChanged()
	if n := a.queue.Len(); n != 0 {
		t.Fatalf("a heartbeat queued %d CSRs", n)
	}
	self := node("node-a", corev1.NodeAddress{Type: corev1.NodeHostName, Address: "node-a"})
	a.cfg.Own = func() ([]netip.Addr, *corev1.Node) {
		return []netip.Addr{netip.MustParseAddr("10.0.0.7")}, self
	}
	a.NodeChanged()
	if n := a.queue.Len(); n != 1 {
		t.Fatalf("a new published address queued %d CSRs, want 1", n)
	}
	c.ClearActions()
	if err := a.sync(context.Background(), "csr-1"); err != nil {
		t.Fatal(err)
	}
	if len(obs.approvals) != 1 {
		t.Errorf("approvals %v after the address was published", obs.approvals)
	}
}
