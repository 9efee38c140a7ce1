package conflicts

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/nodeaddr/nodeaddr/internal/vocab"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// world is a controller on a fake clientset whose informer is fed by hand (no Run): each step
// calls the handlers and Sync as the informer and the workers would.
type world struct {
	t     *testing.T
	cs    *fake.Clientset
	c     *Controller
	rec   *record.FakeRecorder
	now   time.Time
	nodes map[string]*corev1.Node
}

func newWorld(t *testing.T, initial ...*corev1.Node) *world {
	w := &world{t: t, cs: fake.NewClientset(), rec: record.NewFakeRecorder(100),
		now: time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC), nodes: map[string]*corev1.Node{}}
	for _, n := range initial {
		if _, err := w.cs.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	c, err := NewController(Config{Recorder: w.rec, Now: func() time.Time { return w.now }, Window: 30 * time.Second,
		Source: Source{
			Nodes: &cache.ListWatch{
				ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
					return w.cs.CoreV1().Nodes().List(ctx, o)
				},
				WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
					return w.cs.CoreV1().Nodes().Watch(ctx, o)
				},
			},
			PatchStatus: func(ctx context.Context, node string, patch []byte) error {
				_, err := w.cs.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
				return err
			},
		}})
	if err != nil {
		t.Fatal(err)
	}
	w.c = c
	for _, n := range initial {
		w.nodes[n.Name] = n
		_ = c.nodes.GetIndexer().Add(n)
		c.onAdd(n, true)
	}
	w.cs.ClearActions()
	return w
}

func node(name string, ips ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, ip := range ips {
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
	}
	n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeHostName, Address: name})
	return n
}

// set gives a Node new addresses, as an informer update.
func (w *world) set(name string, ips ...string) {
	old := w.nodes[name]
	n := node(name, ips...)
	w.nodes[name] = n
	_ = w.c.nodes.GetIndexer().Update(n)
	w.c.onUpdate(old, n)
}

// sync decides on every Node and returns "node=status" for each condition written, sorted.
func (w *world) sync() []string {
	w.t.Helper()
	w.cs.ClearActions()
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for n := range w.nodes {
			if !yield(n) {
				return
			}
		}
	}) {
		if err := w.c.Sync(context.Background(), name); err != nil {
			w.t.Fatal(err)
		}
	}
	var out []string
	for _, a := range w.cs.Actions() {
		if p, ok := a.(k8stesting.PatchAction); ok && p.GetSubresource() == "status" {
			n, err := w.cs.CoreV1().Nodes().Get(context.Background(), p.GetName(), metav1.GetOptions{})
			if err != nil {
				w.t.Fatal(err)
			}
			out = append(out, p.GetName()+"="+string(Current(n).Status))
		}
	}
	return out
}

func (w *world) events() []string {
	var out []string
	for {
		select {
		case e := <-w.rec.Events:
			out = append(out, e)
		default:
			slices.Sort(out)
			return out
		}
	}
}

func TestController(t *testing.T) {
	w := newWorld(t, node("a", "10.0.2.15"), node("b", "10.0.2.15"), node("c", "192.0.2.3"), node("d", "192.0.2.4"))
	if got := w.sync(); !slices.Equal(got, []string{"a=True", "b=True"}) {
		t.Fatalf("at start, conditions written %v, want a and b True (c, d without conflict: no write)", got)
	}
	ev := w.events()
	if len(ev) != 2 || !strings.Contains(ev[0], "Warning "+vocab.ReasonAddressConflict+" Another Node lists an address of this Node: 10.0.2.15 is also listed by Node a") ||
		!strings.Contains(ev[1], "10.0.2.15 is also listed by Node b") {
		t.Fatalf("events %q", ev)
	}
	if got := w.sync(); len(got) != 0 {
		t.Fatalf("nothing changed, yet conditions written %v", got)
	}

	// c and d swap addresses within the window: a move, no write.
	w.now = w.now.Add(time.Minute)
	w.set("c", "192.0.2.3", "192.0.2.4")
	if got := w.sync(); len(got) != 0 {
		t.Fatalf("d's address appeared on c: conditions written %v inside the window", got)
	}
	w.now = w.now.Add(10 * time.Second)
	w.set("d", "192.0.2.3")
	w.set("c", "192.0.2.4")
	w.now = w.now.Add(10 * time.Second)
	w.set("d", "192.0.2.3")
	if got := w.sync(); len(got) != 0 {
		t.Fatalf("a swap within the window: conditions written %v", got)
	}

	// b gets another address: the conflict ends on both.
	w.set("b", "10.0.2.16")
	if got := w.sync(); !slices.Equal(got, []string{"a=False", "b=False"}) {
		t.Fatalf("after b moved away, conditions written %v, want a and b False", got)
	}
	if ev := w.events(); len(ev) != 2 || !strings.Contains(ev[0], "Normal "+vocab.ReasonAddressConflictResolved) {
		t.Fatalf("events %q", ev)
	}

	// d takes a's address, held since before the detector started, and keeps it past the window:
	// a conflict once the window ends, flagged on d only (a is the Ready incumbent: its condition
	// stays False, unwritten), and counted by the gauges.
	w.set("d", "192.0.2.3", "10.0.2.15")
	if got := w.sync(); len(got) != 0 {
		t.Fatalf("inside the window: conditions written %v", got)
	}
	w.now = w.now.Add(30 * time.Second)
	if got := w.sync(); !slices.Equal(got, []string{"d=True"}) {
		t.Fatalf("past the window, conditions written %v, want d True only", got)
	}
	if ev := w.events(); len(ev) != 1 || !strings.Contains(ev[0], "Warning "+vocab.ReasonAddressConflict+" Another Node lists an address of this Node: 10.0.2.15 is also listed by Node a") {
		t.Fatalf("events %q, want one Warning about d naming a", ev)
	}
	if m := testutilGauge(w.c.cfg.Metrics); m != [2]float64{1, 1} {
		t.Fatalf("gauges addresses, nodes = %v, want [1 1]", m)
	}

	// d is deleted: nothing to write (a never was True again), the gauges drop.
	_ = w.c.nodes.GetIndexer().Delete(w.nodes["d"])
	w.c.onDelete(w.nodes["d"])
	delete(w.nodes, "d")
	if got := w.sync(); len(got) != 0 {
		t.Fatalf("after d was deleted, conditions written %v, want none", got)
	}
	if m := testutilGauge(w.c.cfg.Metrics); m != [2]float64{0, 0} {
		t.Fatalf("gauges addresses, nodes = %v, want [0 0]", m)
	}
}

func testutilGauge(m *Metrics) [2]float64 {
	return [2]float64{testutil.ToFloat64(m.addresses), testutil.ToFloat64(m.nodes)}
}

// add creates a Node after the detector's start, as an informer add.
func (w *world) add(name string, ips ...string) {
	w.t.Helper()
	n := node(name, ips...)
	if _, err := w.cs.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
		w.t.Fatal(err)
	}
	w.nodes[name] = n
	_ = w.c.nodes.GetIndexer().Add(n)
	w.c.onAdd(n, false)
}

// A Node joining with an address another Node lists is flagged at the next decision, the window
// not waited: registered with it (a clone's kubelet), or registered without IPs and given it by its
// agent, or back from listing none; a renumbering onto it still waits the window.
func TestControllerJoin(t *testing.T) {
	w := newWorld(t, node("a", "10.0.2.15"), node("c", "192.0.2.3"))
	w.add("b", "10.0.2.15")
	if got := w.sync(); !slices.Equal(got, []string{"b=True"}) {
		t.Fatalf("b joined with a's address: conditions written %v, want b True at once (a, the Ready incumbent: none)", got)
	}
	if ev := w.events(); len(ev) != 1 || !strings.Contains(ev[0], "10.0.2.15 is also listed by Node a") {
		t.Fatalf("events %q, want one Warning about b naming a", ev)
	}

	// e registers without an IP (a kubelet with --cloud-provider=external), then its agent lists
	// a's address: flagged at once, and b, which joined within the window of e, too.
	w.now = w.now.Add(10 * time.Second)
	w.add("e")
	w.set("e", "10.0.2.15")
	if got := w.sync(); !slices.Equal(got, []string{"b=True", "e=True"}) {
		t.Fatalf("e's agent listed a's address: conditions written %v, want b (now naming e too) and e True", got)
	}
	if ev := w.events(); len(ev) != 2 || !strings.Contains(ev[0], "10.0.2.15 is also listed by Node a, b") ||
		!strings.Contains(ev[1], "10.0.2.15 is also listed by Node a, e") {
		t.Fatalf("events %q", ev)
	}

	// c, which had an address, takes a's too: a renumbering, a move until the window ends; then
	// c is flagged, naming a, b and e (each listed it more than the window before: not marked).
	w.now = w.now.Add(time.Minute)
	w.set("c", "192.0.2.3", "10.0.2.15")
	if got := w.sync(); len(got) != 0 {
		t.Fatalf("c renumbered onto a's address: conditions written %v inside the window", got)
	}
	w.now = w.now.Add(30 * time.Second)
	if got := w.sync(); !slices.Equal(got, []string{"c=True"}) {
		t.Fatalf("past the window, conditions written %v, want c True only", got)
	}
	if ev := w.events(); len(ev) != 1 || !strings.Contains(ev[0], "10.0.2.15 is also listed by Node a, b, e") {
		t.Fatalf("events %q", ev)
	}

	// b drops every IP and lists a's address again (its host had none for longer than the
	// agent's removal grace): its first addresses once more, flagged at once.
	w.set("b")
	w.set("c", "192.0.2.3")
	w.set("e", "10.0.2.17")
	if got := w.sync(); !slices.Equal(got, []string{"b=False", "c=False", "e=False"}) {
		t.Fatalf("b without IPs, c and e renumbered away: conditions written %v, want b, c, e False", got)
	}
	w.events()
	w.now = w.now.Add(time.Minute)
	w.set("b", "10.0.2.15")
	if got := w.sync(); !slices.Equal(got, []string{"b=True"}) {
		t.Fatalf("b lists a's address again after none: conditions written %v, want b True at once", got)
	}
	if m := testutilGauge(w.c.cfg.Metrics); m != [2]float64{1, 1} {
		t.Fatalf("gauges addresses, nodes = %v, want [1 1]", m)
	}
}
