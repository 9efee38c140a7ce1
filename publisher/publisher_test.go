package publisher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/nodeaddr/nodeaddr/resolver"
)

const nodeName = "node-a"

var (
	nodesGVR = corev1.SchemeGroupVersion.WithResource("nodes")
	nodesGR  = schema.GroupResource{Resource: "nodes"}

	uninitTaint   = corev1.Taint{Key: cloudproviderapi.TaintExternalCloudProvider, Value: "true", Effect: corev1.TaintEffectNoSchedule}
	notReadyTaint = corev1.Taint{Key: "node.kubernetes.io/not-ready", Effect: corev1.TaintEffectNoSchedule}
)

func testNode(rv string, addrs []corev1.NodeAddress, taints ...corev1.Taint) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: nodeName, UID: "uid-a", ResourceVersion: rv},
		Spec:       corev1.NodeSpec{Taints: taints},
		Status:     corev1.NodeStatus{Addresses: addrs},
	}
}

// kubeletAddrs is what a kubelet with --cloud-provider=external seeds on a dual-stack node.
func kubeletAddrs() []corev1.NodeAddress {
	return []corev1.NodeAddress{internal("10.0.0.1"), internal("fd00::1"), hostname(nodeName)}
}

func externalState(ips ...string) resolver.State {
	s := resolver.State{Managed: manageExternal}
	for _, ip := range ips {
		s.Addresses = append(s.Addresses, want(resolver.ExternalIP, ip))
	}
	return s
}

func nextRV(rv string) string {
	n, _ := strconv.Atoi(rv)
	return strconv.Itoa(n + 1)
}

// newClient returns a fake clientset holding nodes that answers Node writes the way the API server
// does, which the plain fake does not: every write increments metadata.resourceVersion, a merge
// patch or update carrying a stale resourceVersion fails with 409, and a JSON patch whose `test`
// fails is answered with the API server's bare 422.
func newClient(nodes ...*corev1.Node) *fake.Clientset {
	objs := make([]runtime.Object, 0, len(nodes))
	for _, n := range nodes {
		objs = append(objs, n)
	}
	client := fake.NewClientset(objs...)
	tracker := client.Tracker()
	apply := k8stesting.ObjectReaction(tracker)
	current := func(name string) (*corev1.Node, error) {
		o, err := tracker.Get(nodesGVR, "", name)
		if err != nil {
			return nil, err
		}
		return o.(*corev1.Node), nil
	}
	stale := func(cur *corev1.Node, rv string) error {
		if rv != "" && rv != cur.ResourceVersion {
			return apierrors.NewConflict(nodesGR, cur.Name, errors.New("the object has been modified; please apply your changes to the latest version and try again"))
		}
		return nil
	}
	store := func(n *corev1.Node, prev string) (bool, runtime.Object, error) {
		n = n.DeepCopy()
		n.ResourceVersion = nextRV(prev)
		if err := tracker.Update(nodesGVR, n, ""); err != nil {
			return true, nil, err
		}
		return true, n, nil
	}
	client.PrependReactor("patch", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		pa := a.(k8stesting.PatchActionImpl)
		cur, err := current(pa.GetName())
		if err != nil {
			return true, nil, err
		}
		if pa.GetPatchType() == types.MergePatchType {
			var m struct {
				Metadata struct {
					ResourceVersion string `json:"resourceVersion"`
				} `json:"metadata"`
			}
			if err := json.Unmarshal(pa.GetPatch(), &m); err != nil {
				return true, nil, apierrors.NewBadRequest(err.Error())
			}
			if err := stale(cur, m.Metadata.ResourceVersion); err != nil {
				return true, nil, err
			}
		}
		_, res, err := apply(a)
		if err != nil {
			if pa.GetPatchType() == types.JSONPatchType {
				return true, nil, apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "", schema.GroupResource{}, "", err.Error(), 0, false)
			}
			return true, nil, err
		}
		return store(res.(*corev1.Node), cur.ResourceVersion)
	})
	client.PrependReactor("update", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		n := a.(k8stesting.UpdateActionImpl).GetObject().(*corev1.Node)
		cur, err := current(n.Name)
		if err != nil {
			return true, nil, err
		}
		if err := stale(cur, n.ResourceVersion); err != nil {
			return true, nil, err
		}
		return store(n, cur.ResourceVersion)
	})
	return client
}

// recorded reads what the publisher counted from its metrics, on a registry of their own.
type recorded struct {
	reg *prometheus.Registry
	m   *Metrics
}

func newRecorded() recorded {
	reg := prometheus.NewRegistry()
	return recorded{reg: reg, m: NewMetrics(reg)}
}

// Writes lists the writes counted so far as kind/result, each as many times as it was counted, in
// WriteKinds' then WriteResults' order (counted puts an expected list in that order).
func (r recorded) Writes() []string {
	var out []string
	for _, k := range WriteKinds() {
		for _, res := range WriteResults() {
			for range int(testutil.ToFloat64(r.m.writes.WithLabelValues(k, res))) {
				out = append(out, k+"/"+res)
			}
		}
	}
	return out
}

// counted puts writes (kind/result) in the order Writes lists them: counters keep no order.
func counted(writes []string) []string {
	var out []string
	for _, k := range WriteKinds() {
		for _, res := range WriteResults() {
			for _, w := range writes {
				if w == k+"/"+res {
					out = append(out, w)
				}
			}
		}
	}
	return out
}

func (r recorded) Overwrites() int { return int(testutil.ToFloat64(r.m.overwrites)) }

// reactions is the number of reaction latencies observed.
func (r recorded) reactions() int {
	mfs, err := r.reg.Gather()
	if err != nil {
		panic(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "nodeaddr_reaction_seconds" {
			return int(mf.GetMetric()[0].GetHistogram().GetSampleCount())
		}
	}
	return 0
}

// nodeIPMissing is the provided-node-ip gauge: 1 while the address is missing from the host.
func (r recorded) nodeIPMissing() float64 { return testutil.ToFloat64(r.m.nodeIPMissing) }

// fakeNodes is the fake clientset's Node client. Like the fake clientset itself, it tells the
// reflector that it cannot serve streaming lists (WatchList), so the informer lists then watches.
type fakeNodes struct{ typedcorev1.NodeInterface }

func (fakeNodes) IsWatchListSemanticsUnSupported() bool { return true }

// newInformer is a Node informer over client, as the agent builds one.
func newInformer(client *fake.Clientset) cache.SharedIndexInformer {
	nodes := fakeNodes{client.CoreV1().Nodes()}
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return nodes.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return nodes.Watch(ctx, o)
		},
	}
	return cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, nodes), &corev1.Node{}, 0, cache.Indexers{})
}

// storeView is the agent's view of the Node: the one in an informer's store.
type storeView struct{ store cache.Store }

func (v storeView) Node() *corev1.Node {
	o, ok, err := v.store.GetByKey(nodeName)
	if err != nil || !ok {
		return nil
	}
	return o.(*corev1.Node)
}

type fixture struct {
	client *fake.Clientset
	inf    cache.SharedIndexInformer // the Node informer, as the agent builds it
	p      *Publisher
	obs    recorded
	rec    *record.FakeRecorder
}

// newFixture returns a publisher for nodeName managing ExternalIP, with no rate limit and
// millisecond backoffs, over a client holding node (if not nil).
func newFixture(t *testing.T, node *corev1.Node, tweak ...func(*Config)) *fixture {
	t.Helper()
	var client *fake.Clientset
	if node != nil {
		client = newClient(node)
	} else {
		client = newClient()
	}
	f := &fixture{client: client, obs: newRecorded(), rec: record.NewFakeRecorder(100)}
	cfg := Config{
		NodeName: nodeName, Nodes: fakeNodes{client.CoreV1().Nodes()}, Managed: manageExternal, RemoveTaint: true,
		Rate: rate.Inf, Burst: 1, Recorder: f.rec, Metrics: f.obs.m,
		MinBackoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond, FailuresBeforeWarning: 3,
	}
	for _, fn := range tweak {
		fn(&cfg)
	}
	f.inf = newInformer(client)
	cfg.Node = storeView{f.inf.GetStore()}
	f.p = New(cfg)
	t.Cleanup(f.p.queue.ShutDown)
	return f
}

// observe hands n to the publisher as the informer would: in its store, then to the handler.
func (f *fixture) observe(o any) {
	if n, ok := o.(*corev1.Node); ok {
		if err := f.inf.GetStore().Update(n); err != nil {
			panic(err)
		}
	}
	f.p.onNode(o)
}

// delete removes n as the informer would.
func (f *fixture) delete(n *corev1.Node) {
	if err := f.inf.GetStore().Delete(n); err != nil {
		panic(err)
	}
	f.p.onDelete(n)
}

// run starts the informer and the publisher as the agent does (the handler registered before the
// informer starts, Run after it has synced); Run's result arrives on the channel.
func (f *fixture) run(ctx context.Context) <-chan error {
	done := make(chan error, 1)
	reg, err := f.inf.AddEventHandler(f.p.NodeEvents())
	if err != nil {
		panic(err)
	}
	go f.inf.RunWithContext(ctx)
	go func() {
		if !cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
			done <- ctx.Err()
			return
		}
		done <- f.p.Run(ctx)
	}()
	return done
}

// start feeds the publisher as Run would: the Node as the informer has it, then the desired state.
func (f *fixture) start(t *testing.T, s resolver.State) {
	t.Helper()
	f.observe(f.get(t))
	f.p.Publish(s, time.Now())
}

func (f *fixture) get(t *testing.T) *corev1.Node {
	t.Helper()
	o, err := f.client.Tracker().Get(nodesGVR, "", nodeName)
	if err != nil {
		t.Fatalf("get node: %v", err)
	}
	return o.(*corev1.Node)
}

// patches describes the patch actions, in order: "nodes/status json-patch <body>".
func (f *fixture) patches() []string {
	var out []string
	for _, a := range f.client.Actions() {
		if a.GetVerb() != "patch" {
			continue
		}
		pa := a.(k8stesting.PatchAction)
		res := pa.GetResource().Resource
		if s := pa.GetSubresource(); s != "" {
			res += "/" + s
		}
		out = append(out, fmt.Sprintf("%s %s %s", res, pa.GetPatchType(), pa.GetPatch()))
	}
	return out
}

func (f *fixture) count(verb string) int {
	n := 0
	for _, a := range f.client.Actions() {
		if a.GetVerb() == verb {
			n++
		}
	}
	return n
}

// events drains the recorder.
func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func jsonPatch(path string, old, new any) string {
	b, err := json.Marshal([]jsonPatchOp{{Op: "test", Path: path, Value: old}, {Op: "replace", Path: path, Value: new}})
	if err != nil {
		panic(err)
	}
	return string(b)
}

func addressesPatchAction(old, new []corev1.NodeAddress) string {
	return "nodes/status " + string(types.JSONPatchType) + " " + jsonPatch("/status/addresses", old, new)
}

func taintPatchAction(old, new []corev1.Taint) string {
	return "nodes " + string(types.JSONPatchType) + " " + jsonPatch("/spec/taints", old, new)
}

func assertEqual[T comparable](t *testing.T, what string, got, want []T) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s:\n got  %v\n want %v", what, got, want)
	}
}

const taintRemovedEvent = "Normal TaintRemoved Removed taint " + cloudproviderapi.TaintExternalCloudProvider + ": nodeaddr has set the node addresses"

func TestReconcileNoChangeWritesNothing(t *testing.T) {
	addrs := []corev1.NodeAddress{internal("10.0.0.1"), external("203.0.113.7"), hostname(nodeName)}
	f := newFixture(t, testNode("10", addrs, notReadyTaint))
	f.start(t, externalState("203.0.113.7"))

	if err := f.p.reconcile(t.Context()); err != nil {
		t.Fatal(err)
	}
	assertEqual(t, "patches", f.patches(), nil)
	assertEqual(t, "writes", f.obs.Writes(), counted(nil))
	assertEqual(t, "events", f.events(), nil)
	if !f.p.Ready() {
		t.Error("not ready after a reconcile with nothing to do")
	}
}

func TestReconcileNoChangeStillRemovesTaint(t *testing.T) {
	addrs := []corev1.NodeAddress{internal("10.0.0.1"), external("203.0.113.7"), hostname(nodeName)}
	f := newFixture(t, testNode("10", addrs, notReadyTaint, uninitTaint))
	f.start(t, externalState("203.0.113.7"))
	if !f.p.Tainted() {
		t.Error("not Tainted before the removal")
	}

	if err := f.p.reconcile(t.Context()); err != nil {
		t.Fatal(err)
	}
	if f.p.Tainted() {
		t.Error("Tainted after the removal (the write's response is the current Node)")
	}
	assertEqual(t, "patches", f.patches(), []string{
		taintPatchAction([]corev1.Taint{notReadyTaint, uninitTaint}, []corev1.Taint{notReadyTaint}),
	})
	assertEqual(t, "writes", f.obs.Writes(), counted([]string{"taint/success"}))
	assertEqual(t, "events", f.events(), []string{taintRemovedEvent})
	if got := f.get(t); !slices.Equal(got.Status.Addresses, addrs) || len(got.Spec.Taints) != 1 || got.Spec.Taints[0].Key != notReadyTaint.Key {
		t.Errorf("node after reconcile: addresses %v taints %v", got.Status.Addresses, got.Spec.Taints)
	}
}

func TestReconcileChangeWritesAddressesThenTaint(t *testing.T) {
	f := newFixture(t, testNode("10", kubeletAddrs(), notReadyTaint, uninitTaint))
	f.start(t, externalState("2001:db8::7", "203.0.113.7"))

	if err := f.p.reconcile(t.Context()); err != nil {
		t.Fatal(err)
	}
	merged := []corev1.NodeAddress{
		internal("10.0.0.1"), internal("fd00::1"), external("203.0.113.7"), external("2001:db8::7"), hostname(nodeName),
	}
	assertEqual(t, "patches", f.patches(), []string{
		addressesPatchAction(kubeletAddrs(), merged),
		taintPatchAction([]corev1.Taint{notReadyTaint, uninitTaint}, []corev1.Taint{notReadyTaint}),
	})
	assertEqual(t, "writes", f.obs.Writes(), counted([]string{"addresses/success", "taint/success"}))
	assertEqual(t, "events", f.events(), []string{
		"Normal AddressesUpdated Addresses changed from [] to [{ExternalIP 203.0.113.7} {ExternalIP 2001:db8::7}]",
		taintRemovedEvent,
	})
	n := f.get(t)
	assertEqual(t, "stored addresses", n.Status.Addresses, merged)
	if len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != notReadyTaint.Key {
		t.Errorf("stored taints %v, want only %s", n.Spec.Taints, notReadyTaint.Key)
	}
	if n.ResourceVersion != "12" {
		t.Errorf("resourceVersion %s, want 12 after two writes", n.ResourceVersion)
	}
	if !f.p.Ready() {
		t.Error("not ready")
	}
	if n := f.obs.reactions(); n != 1 {
		t.Errorf("%d reaction observations, want 1", n)
	}

	// The informer lags: it still delivers the Node as it was before our writes. One change is one
	// write: nothing more happens.
	f.observe(testNode("10", kubeletAddrs(), notReadyTaint, uninitTaint))
	if err := f.p.reconcile(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := len(f.patches()); got != 2 {
		t.Errorf("%d patches after a second reconcile, want still 2", got)
	}
}

func TestReconcileEmptyNodeUsesMergePatch(t *testing.T) {
	f := newFixture(t, testNode("5", nil))
	f.start(t, externalState("203.0.113.7"))

	if err := f.p.reconcile(t.Context()); err != nil {
		t.Fatal(err)
	}
	assertEqual(t, "patches", f.patches(), []string{
		`nodes/status application/merge-patch+json {"metadata":{"resourceVersion":"5"},"status":{"addresses":[{"type":"ExternalIP","address":"203.0.113.7"}]}}`,
	})
	assertEqual(t, "stored addresses", f.get(t).Status.Addresses, []corev1.NodeAddress{external("203.0.113.7")})
}

func TestReconcileConflictRereadsAndRetries(t *testing.T) {
	f := newFixture(t, testNode("10", kubeletAddrs(), uninitTaint))
	var once atomic.Bool
	f.client.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		if once.CompareAndSwap(false, true) {
			return true, nil, apierrors.NewConflict(nodesGR, nodeName, errors.New("the object has been modified"))
		}
		return false, nil, nil
	})
	f.start(t, externalState("203.0.113.7"))

	err := f.p.reconcile(t.Context())
	if !errors.Is(err, errConflict) {
		t.Fatalf("reconcile = %v, want errConflict", err)
	}
	assertEqual(t, "writes after the conflict", f.obs.Writes(), counted([]string{"addresses/conflict"}))
	if got := f.count("get"); got != 1 {
		t.Errorf("%d GETs after a conflict, want 1 re-read", got)
	}
	if f.p.Ready() {
		t.Error("ready before anything was written")
	}
	assertEqual(t, "events after the conflict", f.events(), nil)

	if err := f.p.reconcile(t.Context()); err != nil {
		t.Fatal(err)
	}
	assertEqual(t, "writes", f.obs.Writes(), counted([]string{"addresses/conflict", "addresses/success", "taint/success"}))
	if got := len(f.patches()); got != 3 {
		t.Errorf("%d patches, want 3 (conflicted, addresses, taint)", got)
	}
	if !f.p.Ready() {
		t.Error("not ready after the retry")
	}
}

// The cache is stale: another writer changed the addresses. The JSON patch `test` fails with the API
// server's 422, nodeaddr re-reads, merges again, and keeps the other writer's entry.
func TestReconcileFailedTestIsAConflict(t *testing.T) {
	f := newFixture(t, testNode("10", kubeletAddrs()))
	f.start(t, externalState("203.0.113.7"))
	n := f.get(t).DeepCopy()
	n.Status.Addresses = append(n.Status.Addresses, internalDNS("node-a.internal"))
	if _, err := f.client.CoreV1().Nodes().UpdateStatus(t.Context(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	if err := f.p.reconcile(t.Context()); !errors.Is(err, errConflict) {
		t.Fatalf("reconcile = %v, want errConflict", err)
	}
	if err := f.p.reconcile(t.Context()); err != nil {
		t.Fatal(err)
	}
	assertEqual(t, "writes", f.obs.Writes(), counted([]string{"addresses/conflict", "addresses/success"}))
	assertEqual(t, "stored addresses", f.get(t).Status.Addresses, []corev1.NodeAddress{
		internal("10.0.0.1"), internal("fd00::1"), external("203.0.113.7"), hostname(nodeName), internalDNS("node-a.internal"),
	})
	assertEqual(t, "events", f.events(), []string{
		"Normal AddressesUpdated Addresses changed from [] to [{ExternalIP 203.0.113.7}]",
	})
}

func TestReconcileErrorsTurnReadinessOffAndWarnOnce(t *testing.T) {
	f := newFixture(t, testNode("10", kubeletAddrs()))
	var failing atomic.Bool
	f.client.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		if failing.Load() {
			return true, nil, apierrors.NewInternalError(errors.New("etcdserver: request timed out"))
		}
		return false, nil, nil
	})
	f.start(t, externalState("203.0.113.7"))
	if err := f.p.reconcile(t.Context()); err != nil || !f.p.Ready() {
		t.Fatalf("first reconcile = %v, ready %v", err, f.p.Ready())
	}
	f.events()

	failing.Store(true)
	f.p.Publish(externalState("203.0.113.8"), time.Now())
	const warning = "Warning AddressesWriteFailed nodeaddr failed 3 times in a row to write addresses: Internal error occurred: etcdserver: request timed out"
	for i, wantEvents := range [][]string{nil, nil, {warning}, nil} {
		err := f.p.reconcile(t.Context())
		if !apierrors.IsInternalError(err) {
			t.Fatalf("attempt %d: reconcile = %v, want the internal error", i+1, err)
		}
		if f.p.Ready() {
			t.Fatalf("attempt %d: still ready", i+1)
		}
		assertEqual(t, fmt.Sprintf("events after attempt %d", i+1), f.events(), wantEvents)
	}
	assertEqual(t, "writes", f.obs.Writes(), counted([]string{
		"addresses/success", "addresses/error", "addresses/error", "addresses/error", "addresses/error",
	}))

	failing.Store(false)
	if err := f.p.reconcile(t.Context()); err != nil || !f.p.Ready() {
		t.Fatalf("reconcile after recovery = %v, ready %v", err, f.p.Ready())
	}
	// A new run of failures warns again.
	failing.Store(true)
	f.p.Publish(externalState("203.0.113.9"), time.Now())
	f.events()
	for range 3 {
		_ = f.p.reconcile(t.Context())
	}
	if got := f.events(); len(got) != 1 || !strings.HasPrefix(got[0], "Warning AddressesWriteFailed nodeaddr failed 3 times") {
		t.Errorf("events after a new run of failures: %q", got)
	}
}

func TestReconcileWithoutAddressesKeepsTaint(t *testing.T) {
	addrs := []corev1.NodeAddress{internal("10.0.0.1"), external("203.0.113.7"), hostname(nodeName)}
	f := newFixture(t, testNode("10", addrs, uninitTaint))
	f.start(t, externalState())

	if err := f.p.reconcile(t.Context()); err != nil {
		t.Fatal(err)
	}
	assertEqual(t, "patches", f.patches(), []string{
		addressesPatchAction(addrs, []corev1.NodeAddress{internal("10.0.0.1"), hostname(nodeName)}),
	})
	if n := f.get(t); len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != cloudproviderapi.TaintExternalCloudProvider {
		t.Errorf("taints %v, want the uninitialized taint kept", n.Spec.Taints)
	}
}

func TestReconcileRemoveTaintDisabled(t *testing.T) {
	f := newFixture(t, testNode("10", kubeletAddrs(), uninitTaint), func(c *Config) { c.RemoveTaint = false })
	f.start(t, externalState("203.0.113.7"))
	if err := f.p.reconcile(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := f.patches(); len(got) != 1 || !strings.HasPrefix(got[0], "nodes/status ") {
		t.Errorf("patches %q, want one status patch", got)
	}
}

func TestReconcileNothingToDoYet(t *testing.T) {
	f := newFixture(t, testNode("10", kubeletAddrs(), uninitTaint))
	f.observe(f.get(t)) // a Node but no desired state
	if err := f.p.reconcile(t.Context()); err != nil {
		t.Fatal(err)
	}
	g := newFixture(t, nil)
	g.p.Publish(externalState("203.0.113.7"), time.Time{}) // a desired state but no Node
	if err := g.p.reconcile(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(f.client.Actions())+len(g.client.Actions()) != 0 || f.p.Ready() || g.p.Ready() {
		t.Errorf("actions %v %v, ready %v %v: want nothing", f.client.Actions(), g.client.Actions(), f.p.Ready(), g.p.Ready())
	}
}

// The Node is deleted between the read and the write: nothing was written, so no taint patch, no
// readiness, and no Warning (it is not a failure).
func TestReconcileNodeGoneDuringWrite(t *testing.T) {
	f := newFixture(t, testNode("10", kubeletAddrs(), uninitTaint))
	f.start(t, externalState("203.0.113.7"))
	if err := f.client.Tracker().Delete(nodesGVR, "", nodeName); err != nil {
		t.Fatal(err)
	}
	err := f.p.reconcile(t.Context())
	if !apierrors.IsNotFound(err) {
		t.Fatalf("reconcile = %v, want NotFound", err)
	}
	if got := len(f.patches()); got != 1 {
		t.Errorf("%d patches, want 1 (no taint patch)", got)
	}
	if f.p.Ready() {
		t.Error("ready although nothing was written")
	}
	assertEqual(t, "writes", f.obs.Writes(), counted([]string{"addresses/error"}))
	assertEqual(t, "events", f.events(), nil)

	// Once the informer reports the deletion there is nothing to do.
	f.delete(testNode("10", nil))
	if err := f.p.reconcile(t.Context()); err != nil {
		t.Errorf("reconcile after forget = %v", err)
	}
}

func TestPublish(t *testing.T) {
	f := newFixture(t, nil)
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	f.p.Publish(externalState("203.0.113.7"), t0.Add(time.Second))
	f.p.Publish(externalState("203.0.113.8"), t0) // earlier event behind a newer state
	f.p.Publish(externalState("203.0.113.8"), t0.Add(time.Hour))
	for range 100 { // never blocks, however many wake-ups are pending
		f.p.Publish(externalState("203.0.113.8"), time.Time{})
	}
	if got := fmt.Sprint(f.p.DesiredAddresses()); got != "[ExternalIP=203.0.113.8]" {
		t.Errorf("DesiredAddresses = %s, want the latest state's", got)
	}
	node, desired, since := f.p.snapshot()
	if node != nil || !desired.Equal(externalState("203.0.113.8")) || !since.Equal(t0) {
		t.Errorf("snapshot = %v, %v, %v; want nil, the latest state, the earliest event", node, desired, since)
	}
	if f.p.queue.Len() != 1 {
		t.Errorf("%d queued reconciles, want 1", f.p.queue.Len())
	}
}

// kubeletOverwrite is the Node as a kubelet without --cloud-provider=external leaves it: its own list,
// one resourceVersion later than rv, with managedFields naming it.
func kubeletOverwrite(rv string, at time.Time) *corev1.Node {
	n := testNode(nextRV(rv), kubeletAddrs())
	n.ManagedFields = []metav1.ManagedFieldsEntry{
		{Manager: "nodeaddr", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status", Time: &metav1.Time{Time: at.Add(-time.Minute)}},
		{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status", Time: &metav1.Time{Time: at}},
		{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, Time: &metav1.Time{Time: at.Add(time.Minute)}},
		{Manager: "old-writer", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status", Time: &metav1.Time{Time: at.Add(-time.Hour)}},
	}
	return n
}

func TestObserveCountsOverwriteOnce(t *testing.T) {
	f := newFixture(t, testNode("10", kubeletAddrs()))
	f.start(t, externalState("203.0.113.7"))
	if err := f.p.reconcile(t.Context()); err != nil {
		t.Fatal(err)
	}
	written := f.get(t)
	f.events()

	// The informer delivers our own write, then a change that leaves the managed entries alone.
	f.observe(written)
	same := written.DeepCopy()
	same.ResourceVersion = nextRV(written.ResourceVersion)
	same.Labels = map[string]string{"team": "a"}
	f.observe(same)
	if got := f.obs.Overwrites(); got != 0 {
		t.Fatalf("%d overwrites counted for our own write and a label change", got)
	}

	now := time.Now()
	f.observe(kubeletOverwrite(same.ResourceVersion, now))
	if got := f.obs.Overwrites(); got != 1 {
		t.Fatalf("%d overwrites counted, want 1", got)
	}
	assertEqual(t, "events", f.events(), []string{
		"Warning AddressesOverwritten kubelet replaced the addresses nodeaddr wrote ([{ExternalIP 203.0.113.7}] with []); if it is the kubelet, run it with --cloud-provider=external",
	})

	// The kubelet writes again (its status sync) before nodeaddr does: not counted again.
	f.observe(kubeletOverwrite(nextRV(same.ResourceVersion), now.Add(10*time.Second)))
	if got := f.obs.Overwrites(); got != 1 {
		t.Errorf("%d overwrites counted after a second update without a write, want 1", got)
	}
	assertEqual(t, "events after the second update", f.events(), nil)

	// An older observation is ignored.
	f.observe(written)
	if got := f.obs.Overwrites(); got != 1 {
		t.Errorf("%d overwrites after a stale observation, want 1", got)
	}
}

// The watch can deliver our own write before the PATCH response returns: that echo is not an
// overwrite (found by the latency benchmark: the false reverts engaged the back-off).
func TestOwnWriteEchoBeforeResponseIsNotAnOverwrite(t *testing.T) {
	f := newFixture(t, testNode("10", kubeletAddrs()))
	f.start(t, externalState("203.0.113.7"))
	if err := f.p.reconcile(t.Context()); err != nil {
		t.Fatal(err)
	}
	f.observe(f.get(t))
	f.events()
	// The next write's watch event reaches the informer while the PATCH is still in flight.
	f.client.PrependReactor("patch", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		echo := testNode(nextRV(nextRV(f.get(t).ResourceVersion)), append(kubeletAddrs(), external("203.0.113.8")))
		f.observe(echo)
		return false, nil, nil
	})
	f.p.Publish(externalState("203.0.113.8"), time.Now())
	if err := f.p.reconcile(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := f.obs.Overwrites(); got != 0 {
		t.Fatalf("%d overwrites counted for the echo of our own write", got)
	}
	assertEqual(t, "events", f.events(), []string{
		"Normal AddressesUpdated Addresses changed from [{ExternalIP 203.0.113.7}] to [{ExternalIP 203.0.113.8}]",
	})
}

func TestObserveOverwriteAfterEachWrite(t *testing.T) {
	f := newFixture(t, testNode("10", kubeletAddrs()))
	f.start(t, externalState("203.0.113.7"))
	for i := range 2 {
		if err := f.p.reconcile(t.Context()); err != nil {
			t.Fatal(err)
		}
		// The informer delivers our write, then the kubelet's revert (in the tracker as well, so that
		// the next reconcile writes again).
		n := f.get(t)
		f.observe(n)
		rev := kubeletOverwrite(n.ResourceVersion, time.Now())
		if err := f.client.Tracker().Update(nodesGVR, rev, ""); err != nil {
			t.Fatal(err)
		}
		f.observe(rev)
		if got := f.obs.Overwrites(); got != i+1 {
			t.Fatalf("after write %d: %d overwrites, want %d", i+1, got, i+1)
		}
	}
}

func TestObserveIgnoresOtherNodes(t *testing.T) {
	f := newFixture(t, nil)
	other := testNode("10", kubeletAddrs(), uninitTaint)
	other.Name = "node-b"
	f.observe(other)
	f.observe("not a node")
	if node, _, _ := f.p.snapshot(); node != nil {
		t.Errorf("observed %v, want nothing", node.Name)
	}
	if f.p.Tainted() {
		t.Error("tainted by another node's taint")
	}
}

func TestLastStatusWriter(t *testing.T) {
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	n := kubeletOverwrite("1", at)
	if got := lastStatusWriter(n, "nodeaddr"); got != "kubelet" {
		t.Errorf("lastStatusWriter = %q, want kubelet", got)
	}
	n.ManagedFields = n.ManagedFields[:1] // only nodeaddr itself
	if got := lastStatusWriter(n, "nodeaddr"); got != "another writer" {
		t.Errorf("lastStatusWriter = %q, want %q", got, "another writer")
	}
}

// The nodeCache's rule: a copy from the API server stands in for the informer's until the informer
// holds its resourceVersion, another UID or nothing; resourceVersions are never ordered.
func TestNodeCacheCurrentCopy(t *testing.T) {
	mk := func(uid, rv string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName, UID: types.UID(uid), ResourceVersion: rv}}
	}
	for _, tc := range []struct {
		name     string
		received *corev1.Node   // our write's response, before the deliveries
		informed []*corev1.Node // what the informer delivers after it; the store keeps the last
		deleted  bool           // then the store loses the Node
		want     string         // "informed" (the store's), "received" or "none"
	}{
		{"informer only", nil, []*corev1.Node{mk("a", "5")}, false, "informed"},
		{"nothing", nil, nil, false, "none"},
		{"informer behind our write", mk("a", "6"), []*corev1.Node{mk("a", "5")}, false, "received"},
		// A resourceVersion that sorts lower as a number is no older: only equality counts.
		{"informer behind, versions not numerically ordered", mk("a", "9"), []*corev1.Node{mk("a", "10")}, false, "received"},
		{"informer caught up", mk("a", "6"), []*corev1.Node{mk("a", "5"), mk("a", "6")}, false, "informed"},
		{"informer caught up and moved on", mk("a", "6"), []*corev1.Node{mk("a", "6"), mk("a", "8")}, false, "informed"},
		{"node recreated", mk("a", "6"), []*corev1.Node{mk("b", "7")}, false, "informed"},
		{"node deleted", mk("a", "6"), []*corev1.Node{mk("a", "5")}, true, "none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := cache.NewStore(cache.MetaNamespaceKeyFunc)
			c := &nodeCache{view: storeView{store}}
			if tc.received != nil {
				c.received(tc.received)
			}
			for _, n := range tc.informed {
				if err := store.Update(n); err != nil {
					t.Fatal(err)
				}
				c.informed(n)
			}
			if tc.deleted {
				if err := store.Delete(tc.informed[len(tc.informed)-1]); err != nil {
					t.Fatal(err)
				}
			}
			var got string
			switch n := c.get(); {
			case n == nil:
				got = "none"
			case n == tc.received:
				got = "received"
			case n == tc.informed[len(tc.informed)-1]:
				got = "informed"
			}
			if got != tc.want {
				t.Errorf("current copy: %s, want %s", got, tc.want)
			}
		})
	}
}

// Run end to end over the fake clientset's informer, in a synctest bubble: time is virtual and
// synctest.Wait returns once every goroutine is blocked, so nothing sleeps for real.
func TestRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, testNode("10", kubeletAddrs(), notReadyTaint, uninitTaint))
		ctx, cancel := context.WithCancel(t.Context())
		done := f.run(ctx)

		// settle lets the informer's cache-sync poll and the worker run.
		settle := func() {
			time.Sleep(time.Second)
			synctest.Wait()
		}
		settle()
		if f.p.Ready() || len(f.patches()) != 0 {
			t.Fatalf("ready %v, patches %q before any desired state", f.p.Ready(), f.patches())
		}

		f.p.Publish(externalState("203.0.113.7"), time.Now())
		settle()
		merged := []corev1.NodeAddress{internal("10.0.0.1"), internal("fd00::1"), external("203.0.113.7"), hostname(nodeName)}
		assertEqual(t, "patches", f.patches(), []string{
			addressesPatchAction(kubeletAddrs(), merged),
			taintPatchAction([]corev1.Taint{notReadyTaint, uninitTaint}, []corev1.Taint{notReadyTaint}),
		})
		if !f.p.Ready() {
			t.Fatal("not ready after the writes")
		}

		// The same state again, and informer echoes of our writes: nothing more is written.
		f.p.Publish(externalState("203.0.113.7"), time.Now())
		settle()
		if got := len(f.patches()); got != 2 {
			t.Fatalf("%d patches after republishing the same state, want 2", got)
		}

		// A kubelet without --cloud-provider=external reverts the list: counted once, and nodeaddr
		// writes its entries back.
		n := f.get(t).DeepCopy()
		n.Status.Addresses = kubeletAddrs()
		if _, err := f.client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{FieldManager: "kubelet"}); err != nil {
			t.Fatal(err)
		}
		settle()
		if got := f.obs.Overwrites(); got != 1 {
			t.Errorf("%d overwrites, want 1", got)
		}
		if got := f.patches(); len(got) != 3 || got[2] != addressesPatchAction(kubeletAddrs(), merged) {
			t.Errorf("patches after the revert: %q, want a third one writing the addresses back", got)
		}
		assertEqual(t, "stored addresses", f.get(t).Status.Addresses, merged)

		// A new desired state is written once.
		f.p.Publish(externalState("203.0.113.8"), time.Now())
		settle()
		if got := len(f.patches()); got != 4 {
			t.Errorf("%d patches after a new state, want 4", got)
		}
		assertEqual(t, "writes", f.obs.Writes(), counted([]string{"addresses/success", "taint/success", "addresses/success", "addresses/success"}))

		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v, want nil after cancel", err)
		}
	})
}

// Run retries a failed write with backoff, on its own, until it succeeds.
func TestRunRetriesFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, testNode("10", kubeletAddrs(), uninitTaint))
		var fails atomic.Int32
		fails.Store(4)
		f.client.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
			if fails.Add(-1) >= 0 {
				return true, nil, apierrors.NewServiceUnavailable("apiserver restarting")
			}
			return false, nil, nil
		})
		ctx, cancel := context.WithCancel(t.Context())
		done := f.run(ctx)
		f.p.Publish(externalState("203.0.113.7"), time.Now())
		time.Sleep(time.Minute)
		synctest.Wait()
		assertEqual(t, "writes", f.obs.Writes(), counted([]string{
			"addresses/error", "addresses/error", "addresses/error", "addresses/error", "addresses/success", "taint/success",
		}))
		if !f.p.Ready() {
			t.Error("not ready after recovery")
		}
		if got := f.events(); len(got) != 3 || !strings.HasPrefix(got[0], "Warning AddressesWriteFailed nodeaddr failed 3 times") {
			t.Errorf("events %q, want one Warning then the two Normal ones", got)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v, want nil after cancel", err)
		}
	})
}

// The Node is created after nodeaddr starts: it waits, then writes.
func TestRunNodeCreatedLater(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, nil)
		ctx, cancel := context.WithCancel(t.Context())
		done := f.run(ctx)
		f.p.Publish(externalState("203.0.113.7"), time.Now())
		time.Sleep(time.Second)
		synctest.Wait()
		if f.p.Ready() || f.count("patch") != 0 {
			t.Fatalf("ready %v, %d patches without a Node", f.p.Ready(), f.count("patch"))
		}
		if _, err := f.client.CoreV1().Nodes().Create(ctx, testNode("10", kubeletAddrs(), uninitTaint), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		assertEqual(t, "writes", f.obs.Writes(), counted([]string{"addresses/success", "taint/success"}))
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v, want nil after cancel", err)
		}
	})
}
