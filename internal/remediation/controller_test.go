package remediation

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/nodeaddr/nodeaddr/internal/vocab"
)

var t0 = time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)

// rig is a Controller whose caches the test fills, with a clock it moves and an Eviction API that
// records each call and answers what the test says.
type rig struct {
	c       *Controller
	rec     *record.FakeRecorder
	reg     *prometheus.Registry
	now     time.Time
	mu      sync.Mutex
	evicted []string
	refuse  map[string]error // pod name → the Eviction API's answer
}

func newRig(t *testing.T, perNode, total int) *rig {
	t.Helper()
	r := &rig{rec: record.NewFakeRecorder(100), reg: prometheus.NewRegistry(), now: t0, refuse: map[string]error{}}
	lw := &cache.ListWatch{} // never run: the test fills the caches
	c, err := NewController(Config{
		Source: Source{Nodes: lw, Pods: lw, Evict: func(_ context.Context, p *corev1.Pod) error {
			r.mu.Lock()
			defer r.mu.Unlock()
			if err := r.refuse[p.Name]; err != nil {
				return err
			}
			r.evicted = append(r.evicted, p.Name)
			return nil
		}},
		Recorder: r.rec, Metrics: NewMetrics(r.reg), Now: func() time.Time { return r.now },
		Grace: time.Minute, MaxPerNode: perNode, MaxInFlight: total, Backoff: 5 * time.Second, MaxBackoff: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.queue.ShutDown)
	r.c = c
	return r
}

// node adds a Node whose addresses changed at changed.
func (r *rig) node(name string, changed time.Time, ips ...string) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, ip := range ips {
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
	}
	_ = r.c.nodes.GetIndexer().Add(n)
	r.c.changed[name] = changed
}

func (r *rig) pod(node, name, ip string, edit ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name), OwnerReferences: []metav1.OwnerReference{
			{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "ds", UID: "ds", Controller: new(true)}}},
		Spec:   corev1.PodSpec{NodeName: node, HostNetwork: true},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIPs: []corev1.PodIP{{IP: ip}}},
	}
	for _, e := range edit {
		e(p)
	}
	_ = r.c.pods.GetIndexer().Add(p)
	return p
}

func (r *rig) sync(t *testing.T, nodes ...string) {
	t.Helper()
	for _, n := range nodes {
		if err := r.c.Sync(context.Background(), n); err != nil {
			t.Fatalf("Sync(%s): %v", n, err)
		}
	}
}

// takeEvictions returns the pods evicted since the last call.
func (r *rig) takeEvictions() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.evicted
	r.evicted = nil
	return out
}

func (r *rig) events() []string {
	var out []string
	for {
		select {
		case e := <-r.rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func wantList(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s: got %q, want %q", what, got, want)
	}
}

func TestEvictsAfterGraceOnce(t *testing.T) {
	r := newRig(t, 1, 10)
	r.node("a", t0.Add(-30*time.Second), "10.0.0.2")
	r.pod("a", "current", "10.0.0.2")
	r.pod("a", "old", "10.0.0.1")
	r.sync(t, "a")
	wantList(t, "evictions within the grace", r.takeEvictions(), nil)
	if got := testutil.ToFloat64(r.c.cfg.Metrics.stale.WithLabelValues("Grace")); got != 1 {
		t.Errorf("stale pods in grace = %v, want 1", got)
	}
	if got := r.c.oldestStale(); got != 30 {
		t.Errorf("oldest stale = %v s, want 30", got)
	}
	r.now = t0.Add(30 * time.Second)
	r.sync(t, "a", "a")
	wantList(t, "evictions once the grace is over", r.takeEvictions(), []string{"old"})
	wantList(t, "events", r.events(), []string{
		"Normal StalePodEvicted Evicted pod ns/old: its status.podIPs [10.0.0.1] are no longer the Node's addresses"})
	if got := testutil.ToFloat64(r.c.cfg.Metrics.evictions.WithLabelValues(ResultEvicted)); got != 1 {
		t.Errorf("evictions_total{evicted} = %v, want 1", got)
	}
}

// A compromised node b writes its own addresses, and lists node a's current address among them:
// node a's evictable pod (a DaemonSet's, not opted out, no budget) on that address is compared
// with a's addresses only, so nothing is evicted. A verdict that looked at any Node's addresses
// (the address taken as the Node's that lists it last, or "another Node has the pod's IP, so the
// pod is stale") would evict it here. Then node a itself moves: the same pod is evicted, so it was
// evictable all along.
func TestOnlyTheOwnNodeCounts(t *testing.T) {
	r := newRig(t, 5, 10)
	r.node("a", t0.Add(-time.Hour), "10.0.0.2", "192.0.2.2") // two addresses: one left if b's were taken away
	r.node("b", t0.Add(-time.Hour), "10.0.0.9", "10.0.0.2")
	r.pod("a", "on-a", "10.0.0.2")
	r.sync(t, "b", "a", "b")
	wantList(t, "evictions while node b lists node a's address", r.takeEvictions(), nil)
	wantList(t, "events while node b lists node a's address", r.events(), nil)
	r.node("a", t0.Add(-time.Hour), "10.0.0.3")
	r.sync(t, "a")
	wantList(t, "evictions once node a itself moved", r.takeEvictions(), []string{"on-a"})
}

func TestRefusedEvictionIsRetriedWithBackoff(t *testing.T) {
	r := newRig(t, 1, 10)
	r.node("a", t0.Add(-time.Hour), "10.0.0.2")
	r.pod("a", "guarded", "10.0.0.1")
	r.refuse["guarded"] = apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
	r.sync(t, "a")
	wantList(t, "evictions", r.takeEvictions(), nil)
	ev := r.events()
	if len(ev) != 1 || !strings.HasPrefix(ev[0], "Warning StalePodEvictionBlocked Eviction of pod ns/guarded") {
		t.Errorf("events = %q", ev)
	}
	retry := r.c.refused["guarded"].retryAt
	if d := retry.Sub(t0); d < 5*time.Second || d > 7500*time.Millisecond {
		t.Errorf("first retry after %v, want 5 s + up to 50%% jitter", d)
	}
	r.sync(t, "a") // before the retry: no request
	if got := testutil.ToFloat64(r.c.cfg.Metrics.evictions.WithLabelValues(ResultBlocked)); got != 1 {
		t.Errorf("evictions_total{blocked} = %v, want 1 (no attempt before the retry time)", got)
	}
	if got := testutil.ToFloat64(r.c.cfg.Metrics.stale.WithLabelValues("PDBBlocked")); got != 1 {
		t.Errorf("stale pods PDBBlocked = %v, want 1", got)
	}
	r.now = retry
	r.sync(t, "a")
	if d := r.c.refused["guarded"].retryAt.Sub(retry); d < 10*time.Second || d > 15*time.Second {
		t.Errorf("second retry after %v, want 10 s + jitter (doubled)", d)
	}
	delete(r.refuse, "guarded")
	r.now = r.c.refused["guarded"].retryAt
	r.sync(t, "a")
	wantList(t, "evictions once the budget allows", r.takeEvictions(), []string{"guarded"})
}

func TestNotEvictedReportedOnce(t *testing.T) {
	r := newRig(t, 5, 10)
	r.node("a", t0.Add(-time.Hour), "10.0.0.2")
	r.pod("a", "etcd-a", "10.0.0.1", func(p *corev1.Pod) {
		p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "x"}
	})
	r.pod("a", "optout", "10.0.0.1", func(p *corev1.Pod) {
		p.Annotations = map[string]string{vocab.RemediationAnnotation: vocab.RemediationDisabled}
	})
	r.pod("a", "orphan", "10.0.0.1", func(p *corev1.Pod) { p.OwnerReferences = nil })
	r.sync(t, "a", "a")
	wantList(t, "evictions", r.takeEvictions(), nil)
	var reasons []string
	for _, e := range r.events() {
		f := strings.Fields(e)
		reasons = append(reasons, f[0]+" "+f[1]+" "+f[3]+" "+strings.Trim(f[10], "():"))
	}
	wantList(t, "events (once each)", reasons, []string{
		"Warning StalePodNotEvicted ns/etcd-a StaticPod", "Warning StalePodNotEvicted ns/optout OptedOut",
		"Warning StalePodNotEvicted ns/orphan NoController"})
}

func TestBounds(t *testing.T) {
	r := newRig(t, 2, 3)
	for _, n := range []string{"a", "b"} {
		r.node(n, t0.Add(-time.Hour), "10.0.0.2")
		for i := range 3 {
			r.pod(n, fmt.Sprintf("%s%d", n, i), "10.0.0.1")
		}
	}
	r.sync(t, "a", "b")
	wantList(t, "evictions: 2 on a (per Node), 1 on b (3 in the cluster)", r.takeEvictions(), []string{"a0", "a1", "b0"})
	r.sync(t, "a", "b")
	wantList(t, "no more while none is gone", r.takeEvictions(), nil)
	gone, _, _ := r.c.pods.GetIndexer().GetByKey("ns/a0")
	_ = r.c.pods.GetIndexer().Delete(gone)
	if got := r.c.podGone("a0"); !slices.Equal(got, []string{"b"}) {
		t.Errorf("a slot freed queues %q, want b (which waited for a cluster-wide slot)", got)
	}
	r.sync(t, "b")
	wantList(t, "evictions once a pod is gone", r.takeEvictions(), []string{"b1"})
	r.now = t0.Add(11 * time.Minute) // past InFlightTimeout: pods stuck terminating free their slots
	r.sync(t, "a", "b")
	wantList(t, "after the in-flight timeout", r.takeEvictions(), []string{"a2", "b2"})
}

// nodeSeen is the Node informer delivering name with ips (InternalIP) at the rig's time: added
// when old is nil, else updated from old. It returns the Node for the next update.
func (r *rig) nodeSeen(old *corev1.Node, name string, ips ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, ip := range ips {
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
	}
	_ = r.c.nodes.GetIndexer().Update(n)
	if old == nil {
		r.c.onNode.OnAdd(n, false)
	} else {
		r.c.onNode.OnUpdate(old, n)
	}
	return n
}

func startedAt(t time.Time) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c",
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(t)}}}}
	}
}

// The renumbering rule on the informer's view: a pod whose podIPs the kubelet set to the new
// address (flannel's) is evicted when it started before the renumbering the controller saw; the
// first addresses published recreate nothing; a pod started after it stays; a controller that
// started after the renumbering knows nothing of it and has only the podIP rule.
func TestEvictsWhatStartedBeforeTheRenumbering(t *testing.T) {
	r := newRig(t, 5, 10)
	r.now = t0.Add(-10 * time.Minute)
	n := r.nodeSeen(nil, "a") // a Node the agent has not published yet
	r.pod("a", "agent", "10.0.0.1", startedAt(r.now))
	r.pod("a", "flannel", "10.0.0.1", startedAt(r.now.Add(time.Minute)))
	r.now = t0.Add(-5 * time.Minute)
	n = r.nodeSeen(n, "a", "10.0.0.1") // the first addresses published
	r.now = t0.Add(-time.Minute)
	r.sync(t, "a")
	wantList(t, "evictions after the first addresses published", r.takeEvictions(), nil)
	r.now = t0
	r.nodeSeen(n, "a", "10.0.0.2")                                       // renumbered
	r.pod("a", "flannel", "10.0.0.2", startedAt(t0.Add(-9*time.Minute))) // the kubelet gave it the new address
	r.pod("a", "fresh", "10.0.0.2", startedAt(t0.Add(10*time.Second)))   // started on the new address
	r.pod("a", "agent", "10.0.0.1", startedAt(t0.Add(-10*time.Minute)))  // the podIP rule
	r.now = t0.Add(30 * time.Second)
	r.sync(t, "a")
	wantList(t, "evictions within the grace", r.takeEvictions(), nil)
	r.now = t0.Add(time.Minute)
	r.sync(t, "a")
	wantList(t, "evictions", r.takeEvictions(), []string{"agent", "flannel"})
	wantList(t, "events", r.events(), []string{
		"Normal StalePodEvicted Evicted pod ns/agent: its status.podIPs [10.0.0.1] are no longer the Node's addresses",
		"Normal StalePodEvicted Evicted pod ns/flannel: its container c started at 2026-12-06T02:51:00Z, when the Node had [10.0.0.1], which it no longer has (its status.podIPs show the Node's current addresses)"})

	// A controller started after the renumbering: flannel's podIPs look current, nothing known.
	r2 := newRig(t, 5, 10)
	r2.now = t0.Add(time.Hour)
	r2.nodeSeen(nil, "a", "10.0.0.2")
	r2.pod("a", "flannel", "10.0.0.2", startedAt(t0.Add(-9*time.Minute)))
	r2.pod("a", "agent", "10.0.0.1", startedAt(t0.Add(-10*time.Minute)))
	r2.now = t0.Add(2 * time.Hour)
	r2.sync(t, "a")
	wantList(t, "evictions of a controller that did not see the renumbering", r2.takeEvictions(), []string{"agent"})
}
