package csrapproval

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/nodeaddr/nodeaddr/internal/csrapproval/rules"
	"github.com/nodeaddr/nodeaddr/internal/csrapproval/rules/rulestest"
	"github.com/nodeaddr/nodeaddr/internal/vocab"
)

func node(name string, record string, addrs ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if record != "" {
		n.Annotations = map[string]string{vocab.RecordAnnotation: record}
	}
	for _, a := range addrs {
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: a})
	}
	return n
}

// filed is a CSR of spec named name, created at second sec.
func filed(t *testing.T, name string, sec int, s rulestest.CSRSpec) *certv1.CertificateSigningRequest {
	csr := rulestest.Build(t, s)
	csr.Name = name
	csr.CreationTimestamp = metav1.NewTime(time.Unix(int64(1_000_000+sec), 0))
	return csr
}

// newTestController runs a Controller on a fake clientset holding objs until the test ends.
func newTestController(t *testing.T, p Policy, objs ...runtime.Object) (*Controller, *fake.Clientset, *record.FakeRecorder) {
	t.Helper()
	cs := fake.NewClientset(objs...)
	rec := record.NewFakeRecorder(1000)
	c := startController(t, Config{Source: fakeSource(cs), Recorder: rec, Policy: p, Now: func() time.Time { return time.Unix(1_000_100, 0) }})
	return c, cs, rec
}

// startController runs a Controller with cfg until the test ends.
func startController(t *testing.T, cfg Config) *Controller {
	t.Helper()
	c, err := NewController(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return c
}

// fakeSource is the controller's Source on a fake clientset.
func fakeSource(cs *fake.Clientset) Source {
	return Source{
		CSRs: cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return cs.CertificatesV1().CertificateSigningRequests().List(ctx, o)
			},
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return cs.CertificatesV1().CertificateSigningRequests().Watch(ctx, o)
			},
		}, cs),
		Nodes: cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return cs.CoreV1().Nodes().List(ctx, o)
			},
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return cs.CoreV1().Nodes().Watch(ctx, o)
			},
		}, cs),
		Services: cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return cs.CoreV1().Services(rules.APIServerNamespace).List(ctx, o)
			},
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return cs.CoreV1().Services(rules.APIServerNamespace).Watch(ctx, o)
			},
		}, cs),
		EndpointSlices: cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return cs.DiscoveryV1().EndpointSlices(rules.APIServerNamespace).List(ctx, o)
			},
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return cs.DiscoveryV1().EndpointSlices(rules.APIServerNamespace).Watch(ctx, o)
			},
		}, cs),
		Approve: func(ctx context.Context, csr *certv1.CertificateSigningRequest) error {
			_, err := cs.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{})
			return err
		},
	}
}

// approvedNames lists the CSRs the approver approved, in the order of its requests.
func approvedNames(cs *fake.Clientset) []string {
	var out []string
	for _, a := range cs.Actions() {
		if a.GetVerb() == "update" && a.GetSubresource() == "approval" {
			out = append(out, a.(interface{ GetObject() runtime.Object }).GetObject().(*certv1.CertificateSigningRequest).Name)
		}
	}
	return out
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// A node that floods the approver with CSRs delays only its own older ones: its newest are decided
// first, at most MaxPendingPerNode per pass, and another node's good CSR is approved regardless.
// Every fact comes from the informers: one LIST per informer, none per CSR.
func TestControllerFloodNewestFirst(t *testing.T) {
	objs := []runtime.Object{node("node-a", "10.0.0.5", "10.0.0.5"), node("node-b", "10.0.0.6", "10.0.0.6")}
	for i := range 500 {
		objs = append(objs, filed(t, fmt.Sprintf("a-flood-%03d", i), i, rulestest.CSRSpec{IPs: []string{"192.0.2.99"}}))
	}
	objs = append(objs,
		filed(t, "a-good", 600, rulestest.CSRSpec{IPs: []string{"10.0.0.5"}, DNS: []string{"node-a"}}),
		filed(t, "b-good", 0, rulestest.CSRSpec{Username: "system:node:node-b", CN: "system:node:node-b", IPs: []string{"10.0.0.6"}, DNS: []string{"node-b"}}))
	c, cs, _ := newTestController(t, Policy{MaxPendingPerNode: 5}, objs...)
	waitFor(t, "both good CSRs approved", func() bool { return len(approvedNames(cs)) == 2 })
	if got := approvedNames(cs); !slices.Contains(got, "a-good") || !slices.Contains(got, "b-good") {
		t.Fatalf("approved %v", got)
	}
	lists := map[string]int{}
	for _, a := range cs.Actions() {
		if a.GetVerb() == "list" {
			lists[a.GetResource().Resource]++
		}
	}
	want := map[string]int{"certificatesigningrequests": 1, "nodes": 1, "services": 1, "endpointslices": 1}
	if fmt.Sprint(lists) != fmt.Sprint(want) {
		t.Errorf("LISTs %v, want %v", lists, want)
	}
	// node-a's floods are decided newest first, five per pass: whatever has been reported is
	// always the newest ones.
	waitFor(t, "two passes over node-a's flood", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return len(c.reported) >= 9 })
	c.mu.Lock()
	defer c.mu.Unlock()
	var reported []string
	for name := range c.reported {
		reported = append(reported, name)
	}
	slices.Sort(reported)
	var newest []string
	for i := 500 - len(reported); i < 500; i++ {
		newest = append(newest, fmt.Sprintf("a-flood-%03d", i))
	}
	if !slices.Equal(reported, newest) {
		t.Errorf("reported %v, want the newest %d: %v", reported, len(newest), newest)
	}
}

// A flood the approver already refused cannot hide a good CSR filed in the same second with a name
// that sorts first: CSRs not yet decided are decided first.
func TestControllerUndecidedFirst(t *testing.T) {
	objs := []runtime.Object{node("node-a", "10.0.0.5", "10.0.0.5")}
	for i := range 20 {
		objs = append(objs, filed(t, fmt.Sprintf("z-bad-%02d", i), 5, rulestest.CSRSpec{IPs: []string{"192.0.2.99"}}))
	}
	c, cs, _ := newTestController(t, Policy{MaxPendingPerNode: 5}, objs...)
	waitFor(t, "every bad CSR reported", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return len(c.reported) == 20 })
	if _, err := cs.CertificatesV1().CertificateSigningRequests().Create(context.Background(),
		filed(t, "a-good", 5, rulestest.CSRSpec{IPs: []string{"10.0.0.5"}, DNS: []string{"node-a"}}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the good CSR approved", func() bool { return slices.Equal(approvedNames(cs), []string{"a-good"}) })
}

// A CSR filed before its Node's record names the address is approved once the record arrives
// (the Node's update queues its node), and a pending reason is reported once per CSR and reason.
func TestControllerApprovesWhenTheRecordArrives(t *testing.T) {
	n := node("node-a", "", "10.0.0.5")
	c, cs, rec := newTestController(t, Policy{}, n, filed(t, "early", 1, rulestest.CSRSpec{IPs: []string{"10.0.0.5"}, DNS: []string{"node-a"}}))
	waitFor(t, "the pending Event", func() bool { return len(rec.Events) > 0 })
	if ev := <-rec.Events; ev != "Warning KubeletServingCSRPending Kubelet serving CSR early left pending (IPNotPublished): IP 10.0.0.5 is not an address nodeaddr published for Node node-a []" {
		t.Errorf("Event %q", ev)
	}
	if err := c.Sync(context.Background(), "node-a"); err != nil {
		t.Fatal(err)
	}
	if len(rec.Events) != 0 {
		t.Errorf("a second Event for the same reason: %q", <-rec.Events)
	}
	n = n.DeepCopy()
	n.Annotations = map[string]string{vocab.RecordAnnotation: "10.0.0.5"}
	if _, err := cs.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the approval", func() bool { return slices.Equal(approvedNames(cs), []string{"early"}) })
	csr, err := cs.CertificatesV1().CertificateSigningRequests().Get(context.Background(), "early", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c := csr.Status.Conditions; len(c) != 1 || c[0].Type != certv1.CertificateApproved || c[0].Reason != vocab.ApprovalReason {
		t.Errorf("conditions %+v", c)
	}
}

// The kubernetes Service's ClusterIP is the API server's address, and the flag's Service CIDR is
// the Service network, even where no EndpointSlice or ServiceCIDR object says so.
func TestControllerFactsFromTheCluster(t *testing.T) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "kubernetes", Namespace: "default"},
		Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.1", ClusterIPs: []string{"10.96.0.1", "fd00:96::1"}}}
	c, _, _ := newTestController(t, Policy{}, svc, node("node-a", "10.0.0.5", "10.0.0.5"), node("node-b", "", "10.0.0.6"))
	waitFor(t, "sync", func() bool { return c.Ready() == nil })
	c.cfg.ServiceCIDRs = nil
	f := c.Facts("node-a")
	if fmt.Sprint(f.APIServer) != "[10.96.0.1 fd00:96::1]" || !f.Exists || fmt.Sprint(f.Published) != "[10.0.0.5]" {
		t.Errorf("facts %+v", f)
	}
	if got := f.OtherNodeWithIP(netip.MustParseAddr("10.0.0.6")); got != "node-b" {
		t.Errorf("OtherNodeWithIP(10.0.0.6) = %q", got)
	}
	if got := f.OtherNodeWithIP(netip.MustParseAddr("10.0.0.5")); got != "" {
		t.Errorf("OtherNodeWithIP(own address) = %q", got)
	}
	if got := f.OtherNodeWithName("node-b"); got != "node-b" {
		t.Errorf("OtherNodeWithName(node-b) = %q", got)
	}
}

// The informer shows an approval some time after the API server answered it. A node queued again
// in between (another CSR of its, a Node update) finds the CSR still pending in the cache: it is
// not approved a second time (a request and a 409 Conflict), but a later change of it that
// leaves it pending (a newer resourceVersion) is decided again.
func TestControllerApprovesOnceBeforeTheInformerSeesIt(t *testing.T) {
	good := filed(t, "good", 1, rulestest.CSRSpec{IPs: []string{"10.0.0.5"}, DNS: []string{"node-a"}})
	good.ResourceVersion = "1"
	cs := fake.NewClientset(node("node-a", "10.0.0.5", "10.0.0.5"), good)
	src := fakeSource(cs)
	var mu sync.Mutex
	var approvals []string
	approved := func() []string { mu.Lock(); defer mu.Unlock(); return slices.Clone(approvals) }
	src.Approve = func(_ context.Context, csr *certv1.CertificateSigningRequest) error {
		mu.Lock()
		defer mu.Unlock()
		approvals = append(approvals, csr.Name+"@"+csr.ResourceVersion)
		return nil // the API server's 200; its watch event has not come yet
	}
	c := startController(t, Config{Source: src})
	waitFor(t, "the approval", func() bool { return len(approved()) == 1 })
	for range 3 {
		if err := c.Sync(context.Background(), "node-a"); err != nil {
			t.Fatal(err)
		}
	}
	if got := approved(); !slices.Equal(got, []string{"good@1"}) {
		t.Fatalf("approval requests %v, want one", got)
	}
	changed := good.DeepCopy()
	changed.ResourceVersion = "2"
	changed.Labels = map[string]string{"changed": "true"}
	if _, err := cs.CertificatesV1().CertificateSigningRequests().Update(context.Background(), changed, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the changed CSR decided again", func() bool { return len(approved()) == 2 })
	if got := approved(); !slices.Equal(got, []string{"good@1", "good@2"}) {
		t.Errorf("approval requests %v", got)
	}
}
