package csr

import (
	"context"
	"crypto"
	"encoding/json"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodeaddr/nodeaddr/test/harness"
)

// The world of these tests. node-a runs the agent with --approval-record on an uplink with
// 192.0.2.10/24 and 2001:db8::10/64, so its Node carries both as InternalIP and the record
// "192.0.2.10,2001:db8::10". node-b is another Node at 192.0.2.77 (its DNS entry
// node-b.nodes.example.internal) with its own record. The API server's endpoint (the kubernetes
// Service's EndpointSlice) is 192.0.2.250; its ClusterIP is read from the kubernetes Service, inside
// the Service CIDR 10.96.0.0/16 (the control plane's --service-cluster-ip-range, served as the
// ServiceCIDR object `kubernetes`). The approver allows the DNS suffix nodes.example.internal and
// the IP prefixes 192.0.2.0/24 and 2001:db8::/64.
const (
	self, other      = "node-a", "node-b"
	selfIP, selfIP6  = "192.0.2.10", "2001:db8::10"
	otherIP          = "192.0.2.77"
	otherDNS         = "node-b.nodes.example.internal"
	apiServerIP      = "192.0.2.250"
	serviceCIDR      = "10.96.0.0/16"
	serviceIP        = "10.96.7.7" // inside the Service CIDR, no Service's
	outsideIP        = "198.51.100.7"
	dnsSuffix        = "nodes.example.internal"
	allowedPrefixes  = "192.0.2.0/24,2001:db8::/64"
	baselineRecord   = selfIP + "," + selfIP6
	recordKey        = "nodeaddr.io/addresses"
	csrPolicy        = "nodeaddr-kubelet-serving-csr"
	recordPolicy     = "nodeaddr-approval-record"
	eventPending     = "KubeletServingCSRPending"
	eventApproved    = "KubeletServingCSRApproved"
	approvalReason   = "NodeaddrApproved"
	approverSource   = "nodeaddr-approver"
	filersGroup      = "nodeaddr-test:csr-filers" // bound to system:node-bootstrapper: may create CSRs
	providedNodeIPAn = "alpha.kubernetes.io/provided-node-ip"
)

// requester is who files a CSR: the administrator impersonating user in groups.
type requester struct {
	user   string
	groups []string
}

// kubeletOf is node's kubelet, as the Node authorizer sees its client certificate.
func kubeletOf(node string) requester {
	return requester{"system:node:" + node, []string{"system:nodes", "system:authenticated"}}
}

// node is the Node a requester's username names ("" for a user that is no node).
func (r requester) node() string { return strings.TrimPrefix(r.user, "system:node:") }

// csrSpec is a CSR; nil SANs take the requester's own (its node's name and, for node-a, its
// InternalIP), an empty non-nil list none.
type csrSpec struct {
	ips, dns, uris, emails []string
	cn                     string   // system:node:<requester's node> when empty
	org                    []string // [system:nodes] when nil
	usages                 []certv1.KeyUsage
	signer                 string
	key                    crypto.Signer
	// mangle rewrites spec.request (malformed requests).
	mangle func(t *testing.T, request []byte) []byte
}

func (s csrSpec) object(t *testing.T, name, node string) *certv1.CertificateSigningRequest {
	t.Helper()
	if s.ips == nil {
		s.ips = []string{}
		if node == self {
			s.ips = []string{selfIP}
		}
	}
	if s.dns == nil {
		s.dns = []string{node}
	}
	csr, err := harness.ServingCSR{Node: node, IPs: s.ips, DNS: s.dns, URIs: s.uris, Emails: s.emails, Usages: s.usages,
		Key: s.key, CommonName: s.cn, Organization: s.org, Signer: s.signer}.Object(name)
	if err != nil {
		t.Fatal(err)
	}
	if s.mangle != nil {
		csr.Spec.Request = s.mangle(t, csr.Spec.Request)
	}
	return csr
}

// world is the control plane with the base and the component applied, node-a's agent, node-b, the
// API server's EndpointSlice, and the approver.
type world struct {
	t         *testing.T // the approver's and the agent's lifetime
	cp        *harness.ControlPlane
	h         *harness.Host
	agent     *harness.Agent
	approver  *harness.Approver
	clusterIP string
	agentCS   kubernetes.Interface // node-a's agent's token

	mu       sync.Mutex
	clients  map[string]kubernetes.Interface
	approved int // CSRs the test saw approved
	starts   int // approver processes started
}

func newWorld(t *testing.T) *world {
	h := harness.NewHost(t, self)
	cp := h.CP
	ctx := context.Background()
	if err := cp.ApplyPolicy(ctx); err != nil {
		t.Fatal(err)
	}
	component := filepath.Join(harness.RepoDir(), "deploy", "components", "kubelet-serving-csr")
	for _, f := range []string{"rbac.yaml", "policy.yaml"} {
		if err := cp.ApplyManifest(ctx, filepath.Join(component, f)); err != nil {
			t.Fatal(err)
		}
	}
	// Users that may file CSRs without being a kubelet (a bootstrap token's group has this role).
	if _, err := cp.Admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "test-csr-filers"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:node-bootstrapper"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: filersGroup}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cp.CreateNode(t, harness.NodeSpec{Name: self, Addresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: self}}})
	cp.CreateNode(t, harness.NodeSpec{Name: other, Annotations: map[string]string{recordKey: otherIP}, Addresses: []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: otherIP}, {Type: corev1.NodeHostName, Address: other},
		{Type: corev1.NodeInternalDNS, Address: otherDNS}}})
	ready := true
	if _, err := cp.Admin.DiscoveryV1().EndpointSlices("default").Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "kubernetes", Labels: map[string]string{discoveryv1.LabelServiceName: "kubernetes"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{apiServerIP}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, cp: cp, h: h, clients: map[string]kubernetes.Interface{}}
	svc, err := cp.Admin.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w.clusterIP = svc.Spec.ClusterIP
	if ip, err := netip.ParseAddr(w.clusterIP); err != nil || !netip.MustParsePrefix(serviceCIDR).Contains(ip) {
		t.Fatalf("the kubernetes Service's ClusterIP %q is not inside %s", w.clusterIP, serviceCIDR)
	}
	// The approver reads the Service network from the ServiceCIDR objects (no --service-cidr).
	harness.Eventually(t, 30*time.Second, 100*time.Millisecond, "ServiceCIDR kubernetes is ["+serviceCIDR+"]", func() (bool, string) {
		sc, err := cp.Admin.NetworkingV1().ServiceCIDRs().Get(ctx, "kubernetes", metav1.GetOptions{})
		return err == nil && slices.Equal(sc.Spec.CIDRs, []string{serviceCIDR}), fmt.Sprintf("%v %v", sc, err)
	})
	h.Uplink("eth0", selfIP+"/24", "192.0.2.1", 100)
	h.Uplink6("eth0", selfIP6+"/64", "2001:db8::1", 100)
	w.agent = h.Start("--external-ip-target=none", "--approval-record")
	w.waitRecord(t, baselineRecord)
	agent, err := kubernetes.NewForConfig(&rest.Config{Host: cp.Config.Host, BearerToken: cp.AgentToken(t, self),
		TLSClientConfig: rest.TLSClientConfig{Insecure: true}})
	if err != nil {
		t.Fatal(err)
	}
	w.agentCS = agent
	w.startApprover()
	return w
}

func (w *world) startApprover() {
	w.approver = harness.StartApprover(w.t, w.cp, "--allowed-dns-suffixes="+dnsSuffix, "--allowed-ip-prefixes="+allowedPrefixes)
	w.starts++
}

// freshApprover deletes every CSR and restarts the approver, as after a failover: client-go's
// event recorder lets one process write 25 Events per Node and type, then one per 5 minutes, so
// each run of up to 20 attack lines on node-a is decided by a fresh process.
func (w *world) freshApprover(t *testing.T) {
	t.Helper()
	if code := w.approver.Stop(); code != 0 {
		t.Fatalf("approver exited %d:\n%s", code, tail(w.approver.Logs(), 40))
	}
	if err := w.cp.Admin.CertificatesV1().CertificateSigningRequests().DeleteCollection(context.Background(),
		metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	w.startApprover()
}

// waitRecord waits until node-a's record is want and its status lists exactly those InternalIPs.
func (w *world) waitRecord(t *testing.T, want string) {
	t.Helper()
	w.cp.WaitNode(t, self, 30*time.Second, "record "+want, func(n *corev1.Node) bool {
		var ips []string
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				ips = append(ips, a.Address)
			}
		}
		return n.Annotations[recordKey] == want && strings.Join(ips, ",") == want
	})
}

// as is a client of r (the administrator impersonating it).
func (w *world) as(t *testing.T, r requester) kubernetes.Interface {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	key := r.user + "|" + strings.Join(r.groups, ",")
	if c, ok := w.clients[key]; ok {
		return c
	}
	cfg := rest.CopyConfig(w.cp.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: r.user, Groups: r.groups}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w.clients[key] = c
	return c
}

// file creates the CSR as r.
func (w *world) file(t *testing.T, r requester, name string, s csrSpec) (*certv1.CertificateSigningRequest, error) {
	t.Helper()
	node := r.node()
	if !strings.HasPrefix(r.user, "system:node:") {
		node = self
	}
	return w.as(t, r).CertificatesV1().CertificateSigningRequests().Create(context.Background(), s.object(t, name, node), metav1.CreateOptions{})
}

func (w *world) csr(t *testing.T, name string) *certv1.CertificateSigningRequest {
	t.Helper()
	c, err := w.cp.Admin.CertificatesV1().CertificateSigningRequests().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// waitEvent polls for the Event about node with reason whose message names the CSR, and returns it.
func (w *world) waitEvent(t *testing.T, node, reason, csr string) corev1.Event {
	t.Helper()
	var found corev1.Event
	if err := harness.Poll(30*time.Second, 100*time.Millisecond, fmt.Sprintf("a %s Event about Node %s naming CSR %s", reason, node, csr), func() (bool, string) {
		evs := w.cp.Events(t, node, reason)
		for _, e := range evs {
			if strings.Contains(e.Message, " "+csr+" ") {
				found = e
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d %s Events naming other CSRs", len(evs), reason)
	}); err != nil {
		t.Fatalf("%v; approver log:\n%s", err, tail(w.approver.Logs(), 40))
	}
	return found
}

// eventsNaming lists the Events in default whose message names the CSR.
func (w *world) eventsNaming(t *testing.T, csr string) []corev1.Event {
	t.Helper()
	list, err := w.cp.Admin.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.Event
	for _, e := range list.Items {
		if strings.Contains(e.Message, " "+csr+" ") {
			out = append(out, e)
		}
	}
	return out
}

func (w *world) metrics(t *testing.T) map[string]float64 {
	t.Helper()
	m, err := w.approver.Metrics()
	if err != nil {
		t.Fatalf("scrape approver: %v", err)
	}
	return m
}

// pendingDeltas are the nodeaddr_csr_pending_total series that changed from before to after.
func pendingDeltas(before, after map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		if strings.HasPrefix(k, "nodeaddr_csr_pending_total") && v != before[k] {
			out[k] = v - before[k]
		}
	}
	return out
}

// expectApproved waits for the approval of the CSR of node and checks its one Approved condition,
// its Event and the approval metrics; published is the addresses the approver names, as Go prints
// a []netip.Addr ("[192.0.2.10 2001:db8::10]").
func (w *world) expectApproved(t *testing.T, node, name, published string, before map[string]float64) {
	t.Helper()
	ev := w.waitEvent(t, node, eventApproved, name)
	if ev.Type != corev1.EventTypeNormal || ev.Source.Component != approverSource || ev.Namespace != "default" ||
		!strings.HasSuffix(ev.Message, "published "+published) {
		t.Errorf("Event %s %s/%s from %+v: %q, want Normal in default from %s ending with %q",
			ev.Type, ev.Namespace, ev.Name, ev.Source, ev.Message, approverSource, published)
	}
	conds := w.csr(t, name).Status.Conditions
	if len(conds) != 1 || conds[0].Type != certv1.CertificateApproved || conds[0].Status != corev1.ConditionTrue ||
		conds[0].Reason != approvalReason || !strings.Contains(conds[0].Message, "Node "+node+" "+published+",") {
		t.Errorf("conditions %+v, want one Approved=True %s naming Node %s %s", conds, approvalReason, node, published)
	}
	w.mu.Lock()
	w.approved++
	w.mu.Unlock()
	after := w.metrics(t)
	for _, m := range []string{"nodeaddr_csr_approved_total", "nodeaddr_csr_approval_seconds_count"} {
		if d := after[m] - before[m]; d != 1 {
			t.Errorf("%s grew by %v, want 1", m, d)
		}
	}
}

// expectPending checks that the CSR of node has no condition and one Warning Event naming reason,
// and that reason's pending counter, and no other, grew by one since before.
func (w *world) expectPending(t *testing.T, node, name, reason string, before map[string]float64) {
	t.Helper()
	ev := w.waitEvent(t, node, eventPending, name)
	want := fmt.Sprintf("Kubelet serving CSR %s left pending (%s): ", name, reason)
	// client-go's recorder merges a Node's 11th and later Events of one reason within 10 minutes
	// into one Event, whose message is the latest one's behind this prefix.
	msg := strings.TrimPrefix(ev.Message, "(combined from similar events): ")
	if ev.Type != corev1.EventTypeWarning || ev.Source.Component != approverSource || ev.Namespace != "default" ||
		!strings.HasPrefix(msg, want) {
		t.Errorf("Event %s %s from %+v: %q, want a Warning in default from %s starting %q",
			ev.Type, ev.Namespace, ev.Source, ev.Message, approverSource, want)
	}
	if c := w.csr(t, name).Status.Conditions; len(c) != 0 {
		t.Errorf("conditions %+v, want none (pending)", c)
	}
	got := pendingDeltas(before, w.metrics(t))
	if wantK := `nodeaddr_csr_pending_total{reason="` + reason + `"}`; len(got) != 1 || got[wantK] != 1 {
		t.Errorf("pending counters grew by %v, want only %s by 1", got, wantK)
	}
}

// expectDenied checks that err is a 403 from the ValidatingAdmissionPolicy policy whose message
// contains want.
func expectDenied(t *testing.T, err error, policy, want string) {
	t.Helper()
	if msg, ok := harness.DeniedByPolicy(err, policy); !ok || !strings.Contains(msg, want) {
		t.Errorf("err %v, want 403 from ValidatingAdmissionPolicy %s saying %q", err, policy, want)
	}
}

// expectRBACDenial checks that err is RBAC's 403 (no rule grants it), not an admission policy's.
func expectRBACDenial(t *testing.T, err error, want string) {
	t.Helper()
	if !harness.DeniedByRBAC(err) || !strings.Contains(err.Error(), want) {
		t.Errorf("err %v, want RBAC's 403 saying %q", err, want)
	}
}

// patchNode merge-patches node (status when sub is "status") as c.
func patchNode(c kubernetes.Interface, node, sub string, patch any) error {
	b, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	var subs []string
	if sub != "" {
		subs = []string{sub}
	}
	_, err = c.CoreV1().Nodes().Patch(context.Background(), node, types.MergePatchType, b, metav1.PatchOptions{}, subs...)
	return err
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
