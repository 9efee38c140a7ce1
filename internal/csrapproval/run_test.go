package csrapproval

import (
	"context"
	"crypto/x509"
	"errors"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// running is an approver of node-a run on a fake clientset with a short window, and the requests it
// made, as "verb resource[/sub]".
type running struct {
	a      *Approver
	c      *fake.Clientset
	obs    *countingObserver
	cancel func()
	done   chan struct{}
}

func runApprover(t *testing.T, window, backstop time.Duration) *running {
	t.Helper()
	return runApproverWith(t, window, backstop, nil)
}

// runApproverWith is runApprover with configure applied to the Config first.
func runApproverWith(t *testing.T, window, backstop time.Duration, configure func(*Config)) *running {
	t.Helper()
	f, c, _, _ := fixture(t, build(t, csrSpec{}))
	if err := c.CertificatesV1().CertificateSigningRequests().Delete(context.Background(), "csr-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	obs := &countingObserver{}
	cfg := f.cfg
	cfg.Window, cfg.Backstop, cfg.Now, cfg.Observer = window, backstop, time.Now, &lockedObserver{o: obs}
	if configure != nil {
		configure(&cfg)
	}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	a.win.minOpen = window / 4
	c.ClearActions()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{a: a, c: c, obs: obs, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		a.Run(ctx)
	}()
	t.Cleanup(r.stop)
	return r
}

func (r *running) stop() {
	r.cancel()
	<-r.done
}

// requests returns the approver's requests made since the last call (the test's own, which create
// and get CSRs, are left out: the approver does neither).
func (r *running) requests() []string {
	var out []string
	for _, act := range r.c.Actions() {
		if v := act.GetVerb(); v == "create" || v == "get" {
			continue
		}
		s := act.GetVerb() + " " + act.GetResource().Resource
		if sub := act.GetSubresource(); sub != "" {
			s += "/" + sub
		}
		if l, ok := act.(k8stesting.ListAction); ok && act.GetResource().Resource == "certificatesigningrequests" {
			if fs := l.GetListRestrictions().Fields.String(); fs != SignerFieldSelector {
				s += " (field selector " + fs + ")"
			}
		}
		out = append(out, s)
	}
	r.c.ClearActions()
	return out
}

// waitFor polls until cond holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within 5s", what)
		}
	}
}

func (r *running) approved(t *testing.T, name string) bool {
	got, err := r.c.CertificatesV1().CertificateSigningRequests().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return slices.ContainsFunc(got.Status.Conditions, func(c certv1.CertificateSigningRequestCondition) bool {
		return c.Type == certv1.CertificateApproved
	})
}

// file creates a legitimate CSR of node-a now, as its kubelet would.
func (r *running) file(t *testing.T, name string) {
	t.Helper()
	csr := build(t, csrSpec{})
	csr.Name, csr.CreationTimestamp = name, metav1.NewTime(time.Now())
	if _, err := r.c.CertificatesV1().CertificateSigningRequests().Create(context.Background(), csr, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (r *running) watching() bool {
	r.a.mu.Lock()
	defer r.a.mu.Unlock()
	return !r.a.win.until.IsZero() && time.Now().Before(r.a.win.until)
}

// The window's life in requests: at the start one LIST and one WATCH of kubelet-serving CSRs; a CSR
// filed in the window is approved (the decision's two reads, the approval) and settles the window;
// then nothing at all, however long; an address change of the Node opens it again with one LIST
// and one WATCH.
func TestApproverWatchesOnlyInWindows(t *testing.T) {
	r := runApprover(t, 400*time.Millisecond, -1)
	waitFor(t, "watch at the start", func() bool { return len(r.c.Actions()) >= 2 })
	if got, want := r.requests(), []string{"list certificatesigningrequests", "watch certificatesigningrequests"}; !slices.Equal(got, want) {
		t.Fatalf("start: requests %q, want %q", got, want)
	}
	r.file(t, "csr-2")
	waitFor(t, "approval", func() bool { return r.approved(t, "csr-2") })
	waitFor(t, "the window to settle", func() bool { return !r.watching() })
	// Settled before its span ended: the minimum time open (100ms) after the opening.
	if got, want := r.requests(), []string{"list nodes", "list endpointslices",
		"update certificatesigningrequests/approval"}; !slices.Equal(got, want) {
		t.Fatalf("approval: requests %q, want %q", got, want)
	}
	time.Sleep(time.Second) // idle: more than twice the window's span
	if got := r.requests(); len(got) != 0 {
		t.Fatalf("idle: requests %q, want none", got)
	}
	old := node("node-a", corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.0.5"})
	r.a.NodeUpdated(old, old.DeepCopy())
	time.Sleep(50 * time.Millisecond)
	if got := r.requests(); len(got) != 0 {
		t.Fatalf("heartbeat: requests %q, want none", got)
	}
	// The address change opens the window from the Node's resource version: a watch, no LIST.
	moved := node("node-a", corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.0.7"})
	moved.ResourceVersion = "4711"
	r.a.NodeUpdated(old, moved)
	waitFor(t, "watch after the address change", func() bool { return len(r.c.Actions()) >= 1 })
	acts := r.c.Actions()
	if got, want := r.requests(), []string{"watch certificatesigningrequests"}; !slices.Equal(got, want) {
		t.Fatalf("address change: requests %q, want %q", got, want)
	}
	if w, ok := acts[0].(k8stesting.WatchAction); !ok || w.GetWatchRestrictions().ResourceVersion != "4711" {
		t.Fatalf("address change: watch %#v, want one from resourceVersion 4711", acts[0])
	}
	r.file(t, "csr-3")
	waitFor(t, "approval in the watch from the Node's resource version", func() bool { return r.approved(t, "csr-3") })
	if n := r.approvals(); n != 2 {
		t.Errorf("%d approvals, want 2", n)
	}
}

// switchableCert is a kubelet whose serving certificate the test changes.
type switchableCert struct {
	mu    sync.Mutex
	cert  *x509.Certificate
	reads int
}

func (s *switchableCert) set(c *x509.Certificate) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cert = c
}

func (s *switchableCert) read(context.Context, *corev1.Node, []netip.Addr) (*x509.Certificate, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	if s.cert == nil {
		return nil, errors.New("connection refused")
	}
	return s.cert, nil
}

// With the kubelet's serving certificate read, the backstop LISTs only while a CSR may come: none
// while the certificate is current, one per interval while it nears its end, and a certificate
// that misses a published address opens the window once (LIST and watch), not at every probe.
func TestApproverBackstopFollowsKubeletCert(t *testing.T) {
	kubelet := &switchableCert{}
	now := time.Now()
	kubelet.set(servingCert(t, now.Add(-time.Minute), time.Hour, "10.0.0.5", "fd00::5"))
	r := runApproverWith(t, 200*time.Millisecond, 100*time.Millisecond, func(c *Config) {
		c.Kubelet, c.ProbeInterval = kubelet.read, 20*time.Millisecond
	})
	waitFor(t, "the start window to end", func() bool { return len(r.c.Actions()) >= 2 && !r.watching() })
	if got, want := r.requests(), []string{"list certificatesigningrequests", "watch certificatesigningrequests"}; !slices.Equal(got, want) {
		t.Fatalf("start: requests %q, want %q and no backstop LIST (certificate current)", got, want)
	}
	time.Sleep(time.Second) // ten backstop intervals
	if got := r.requests(); len(got) != 0 {
		t.Fatalf("idle with a current certificate: requests %q, want none", got)
	}
	kubelet.set(servingCert(t, now.Add(-50*time.Minute), time.Hour, "10.0.0.5", "fd00::5")) // 83% of its life
	time.Sleep(time.Second)
	if got := r.requests(); len(got) < 3 || len(withoutBackstops(got)) != 0 {
		t.Fatalf("rotating: requests %q, want a backstop LIST per interval", got)
	}
	kubelet.set(servingCert(t, now.Add(-time.Minute), time.Hour, "10.0.0.4", "fd00::5")) // the old address
	waitFor(t, "the window opened by the uncovered certificate", func() bool { return len(r.c.Actions()) >= 2 })
	time.Sleep(time.Second) // fifty probes, the window's span and ten backstop intervals
	// Backstop LISTs go on around it: a CSR is still expected.
	got := r.requests()
	if watches := slices.DeleteFunc(slices.Clone(got), func(s string) bool { return s != "watch certificatesigningrequests" }); len(watches) != 1 ||
		len(withoutBackstops(got)) != 1 {
		t.Fatalf("uncovered: requests %q, want one window (one watch) among backstop LISTs", got)
	}
	kubelet.set(nil) // not readable: the backstop LISTs as without a probe
	time.Sleep(500 * time.Millisecond)
	if got := r.requests(); len(got) < 2 || len(withoutBackstops(got)) != 0 {
		t.Errorf("certificate not read: requests %q, want backstop LISTs", got)
	}
}

// With no CSR coming, the window runs its span and closes; then the backstop LISTs once per
// interval, and a CSR filed outside any window (a rotation) is approved after the next one.
func TestApproverBackstopListsOutsideWindows(t *testing.T) {
	r := runApprover(t, 200*time.Millisecond, 300*time.Millisecond)
	waitFor(t, "the start window to end", func() bool { return len(r.c.Actions()) >= 2 && !r.watching() })
	got := r.requests()
	if want := []string{"list certificatesigningrequests", "watch certificatesigningrequests"}; !slices.Equal(got[:2], want) ||
		len(withoutBackstops(got[2:])) != 0 {
		t.Fatalf("start window: requests %q, want %q then only backstop LISTs", got, want)
	}
	r.file(t, "rotation")
	waitFor(t, "approval by the backstop", func() bool { return r.approved(t, "rotation") })
	got = r.requests()
	if want := []string{"list nodes", "list endpointslices", "update certificatesigningrequests/approval"}; len(got) == 0 ||
		got[0] != "list certificatesigningrequests" || !slices.Equal(withoutBackstops(got), want) {
		t.Fatalf("rotation: requests %q, want a backstop LIST, then %q", got, want)
	}
	time.Sleep(700 * time.Millisecond)
	got = r.requests()
	if len(got) == 0 || len(withoutBackstops(got)) != 0 {
		t.Errorf("between backstops: requests %q, want only backstop LISTs", got)
	}
}

// withoutBackstops drops the backstop LISTs from requests and returns the rest.
func withoutBackstops(requests []string) []string {
	return slices.DeleteFunc(slices.Clone(requests), func(s string) bool { return s == "list certificatesigningrequests" })
}

// lockedObserver serializes a countingObserver for the approver's worker.
type lockedObserver struct {
	mu sync.Mutex
	o  *countingObserver
}

func (l *lockedObserver) OnCSRPending(r string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.o.OnCSRPending(r)
}

func (l *lockedObserver) OnCSRApproved(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.o.OnCSRApproved(d)
}

func (r *running) approvals() int {
	l := r.a.cfg.Observer.(*lockedObserver)
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.o.approvals)
}

// A renumbering as the approver sees it with the kubelet's certificate read (probes driven by the
// test): the window watches from the Node's resource version, one probe sees the certificate miss
// the new address, the CSR is approved, the kubelet serves the new certificate before the next
// probe, and nothing else is read: no LIST, neither from the probe nor from the backstop. When the
// kubelet does not renew, two probes in a row after the window closed open one window with a LIST,
// once per certificate and addresses.
func TestApproverRenumberingWithKubeletCert(t *testing.T) {
	kubelet := &switchableCert{}
	now := time.Now()
	kubelet.set(servingCert(t, now.Add(-time.Minute), time.Hour, "10.0.0.5", "fd00::5"))
	r := runApproverWith(t, 600*time.Millisecond, 50*time.Millisecond, func(c *Config) {
		c.Kubelet, c.ProbeInterval = kubelet.read, time.Hour // the loop probes once, at the start
	})
	waitFor(t, "the start window to end", func() bool { return len(r.c.Actions()) >= 2 && !r.watching() })
	r.requests()
	ctx := context.Background()
	old := node("node-a", corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.0.4"})
	moved := node("node-a", corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.0.5"})
	moved.ResourceVersion = "77"
	kubelet.set(servingCert(t, now.Add(-time.Minute), time.Hour, "10.0.0.4", "fd00::5")) // not yet renewed
	r.a.NodeUpdated(old, moved)
	r.a.probe(ctx)
	// The fake clientset's watch sees only what comes after it (an API server's, from resource
	// version 77, would replay the CSR).
	waitFor(t, "the window's watch", func() bool { return len(r.c.Actions()) >= 1 })
	r.file(t, "csr-renewal")
	waitFor(t, "approval", func() bool { return r.approved(t, "csr-renewal") })
	waitFor(t, "the window to settle", func() bool { return !r.watching() })
	time.Sleep(200 * time.Millisecond) // four backstop intervals before the kubelet renews
	kubelet.set(servingCert(t, now, time.Hour, "10.0.0.5", "fd00::5"))
	r.a.probe(ctx)
	time.Sleep(200 * time.Millisecond)
	if got, want := r.requests(), []string{"watch certificatesigningrequests", "list nodes", "list endpointslices",
		"update certificatesigningrequests/approval"}; !slices.Equal(got, want) {
		t.Fatalf("renumbering: requests %q, want %q", got, want)
	}

	// The kubelet does not renew (it was down in the window): the probes during the window wait.
	kubelet.set(servingCert(t, now.Add(-2*time.Minute), time.Hour, "10.0.0.4", "fd00::5"))
	back := old.DeepCopy()
	back.ResourceVersion = "88"
	r.a.NodeUpdated(moved, back)
	r.a.probe(ctx)
	r.a.probe(ctx)
	waitFor(t, "the window's span to end", func() bool { return !r.watching() })
	// After the window, the backstop LISTs: the certificate is confirmed uncovered.
	if got, want := r.requests(), []string{"watch certificatesigningrequests"}; len(got) == 0 || got[0] != want[0] ||
		!slices.Equal(withoutBackstops(got), want) {
		t.Fatalf("window with no CSR: requests %q, want %q first, then only backstop LISTs", got, want)
	}
	r.a.probe(ctx)
	waitFor(t, "the window the probe opened", func() bool { return r.watching() })
	waitFor(t, "that window's span to end", func() bool { return !r.watching() })
	r.a.probe(ctx) // the same certificate and addresses: no second window
	time.Sleep(100 * time.Millisecond)
	got := r.requests()
	if i := slices.Index(got, "watch certificatesigningrequests"); i < 1 || got[i-1] != "list certificatesigningrequests" ||
		slices.Contains(got[i+1:], "watch certificatesigningrequests") {
		t.Fatalf("probe's window: requests %q, want one LIST and watch (backstop LISTs aside)", got)
	}
}
