package csrapproval

import (
	"context"
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
	f, c, _, _ := fixture(t, build(t, csrSpec{}))
	if err := c.CertificatesV1().CertificateSigningRequests().Delete(context.Background(), "csr-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	obs := &countingObserver{}
	cfg := f.cfg
	cfg.Window, cfg.Backstop, cfg.Now, cfg.Observer = window, backstop, time.Now, &lockedObserver{o: obs}
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
	moved := node("node-a", corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.0.7"})
	r.a.NodeUpdated(old, moved)
	waitFor(t, "watch after the address change", func() bool { return len(r.c.Actions()) >= 2 })
	if got, want := r.requests(), []string{"list certificatesigningrequests", "watch certificatesigningrequests"}; !slices.Equal(got, want) {
		t.Fatalf("address change: requests %q, want %q", got, want)
	}
	if n := r.approvals(); n != 1 {
		t.Errorf("%d approvals, want 1", n)
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
