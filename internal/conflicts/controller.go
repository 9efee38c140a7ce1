package conflicts

// The detector: the I/O around Decide. One Node informer, indexed by IP (internal/nodeindex), holds
// every fact; a Node event queues that Node and the Nodes that list, or listed, one of its
// addresses (an index lookup per address: O(1) per change, no LIST after the informer's first).
// The work queue is keyed by Node; a sync writes only the Node's own condition, and only when it
// changes (Plan): a fleet without conflicts costs no write at all.

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"github.com/nodeaddr/nodeaddr/internal/nodeindex"
	"github.com/nodeaddr/nodeaddr/internal/vocab"
	"github.com/nodeaddr/nodeaddr/internal/workers"
)

// DefaultWindow is --move-window's default: an address on two Nodes for less than this is a move.
// At 5 000 Nodes a renumbering of every Node converged within 20.01 s (docs/bench/scale-5000-flowschema.md,
// p99 19.73 s), and the soak's slowest single change took 10.26 s (docs/bench/results.md): 30 s
// covers both, so a renumbering that swaps addresses between Nodes is never flagged.
const DefaultWindow = 30 * time.Second

// Source is what the detector reads and writes: API.Source builds it, tests on a fake clientset.
type Source struct {
	// Nodes lists and watches every Node.
	Nodes cache.ListerWatcher
	// PatchStatus sends a strategic merge patch to a Node's status subresource.
	PatchStatus func(ctx context.Context, node string, patch []byte) error
}

// Config configures a Controller.
type Config struct {
	Source   Source
	Recorder record.EventRecorder
	Metrics  *Metrics
	Logger   *slog.Logger
	Now      func() time.Time
	// Window is the move window (DefaultWindow when negative; 0 flags at once).
	Window time.Duration
	// Workers decide in parallel (2 when 0).
	Workers int
}

// claimKey is one Node listing one address.
type claimKey struct {
	node string
	ip   netip.Addr
}

// begun is when the detector first saw a claim (zero: listed before its start) and whether it came
// with the Node's first addresses (Claim.First).
type begun struct {
	at    time.Time
	first bool
}

// Controller keeps each Node's vocab.ConditionAddressConflict condition true to Decide.
type Controller struct {
	cfg   Config
	queue workqueue.TypedRateLimitingInterface[string]
	nodes cache.SharedIndexInformer
	ready atomic.Bool

	mu      sync.Mutex
	since   map[claimKey]begun      // when and how each claim began
	written map[string]Written      // the condition last written per Node, until the informer shows it
	flagged map[string][]netip.Addr // Nodes in conflict → their conflicting addresses (for the gauges)
}

// NewController builds the informer and the queue; nothing runs until Run.
func NewController(cfg Config) (*Controller, error) {
	if cfg.Source.Nodes == nil || cfg.Source.PatchStatus == nil {
		return nil, errors.New("conflict detector: Nodes and PatchStatus are required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Recorder == nil {
		cfg.Recorder = &record.FakeRecorder{}
	}
	cfg.Logger = cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(prometheus.NewRegistry())
	}
	if cfg.Window < 0 {
		cfg.Window = DefaultWindow
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 2
	}
	c := &Controller{cfg: cfg, since: map[claimKey]begun{}, written: map[string]Written{}, flagged: map[string][]netip.Addr{},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "address-conflicts"})}
	c.nodes = cache.NewSharedIndexInformer(cfg.Source.Nodes, &corev1.Node{}, 0, nodeindex.Indexers())
	if err := c.nodes.SetTransform(trim); err != nil {
		return nil, err
	}
	_, err := c.nodes.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: c.onAdd, UpdateFunc: c.onUpdate, DeleteFunc: c.onDelete,
	})
	return c, err
}

// trim keeps of a Node what the detector reads (name, addresses, the Ready condition and its own):
// images, capacity and managedFields make up most of a cached Node, 5 000 times over.
func trim(o any) (any, error) {
	n, ok := o.(*corev1.Node)
	if !ok {
		return o, nil
	}
	t := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion},
		Status: corev1.NodeStatus{Addresses: n.Status.Addresses}}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady || c.Type == vocab.ConditionAddressConflict {
			t.Status.Conditions = append(t.Status.Conditions, c)
		}
	}
	return t, nil
}

// Ready reports whether the informer has synced and the workers run.
func (c *Controller) Ready() error {
	if !c.ready.Load() {
		return errors.New("conflict detector: informer not synced")
	}
	return nil
}

// Run starts the informer, waits for it, and decides until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	defer c.queue.ShutDown()
	var informer sync.WaitGroup
	defer informer.Wait()
	informer.Go(func() { c.nodes.RunWithContext(ctx) })
	if !cache.WaitForCacheSync(ctx.Done(), c.nodes.HasSynced) {
		return fmt.Errorf("conflict detector: informer did not sync: %w", context.Cause(ctx))
	}
	c.ready.Store(true)
	c.cfg.Logger.Info("address conflict detector running", "workers", c.cfg.Workers, "move_window", c.cfg.Window)
	workers.Run(ctx, c.queue, c.cfg.Workers, c.Sync, c.cfg.Logger, "address conflict condition not written, retrying")
	return nil
}

// Sync decides on node's condition and writes it when it changes.
func (c *Controller) Sync(ctx context.Context, node string) error {
	idx := c.nodes.GetIndexer()
	o, exists, err := idx.GetByKey(node)
	if err != nil || !exists {
		c.forget(node)
		return err
	}
	n, ok := o.(*corev1.Node)
	if !ok {
		return nil
	}
	var shared []Shared
	c.mu.Lock()
	for _, ip := range nodeindex.IPs(n) {
		holders := nodeindex.ByIP(idx, ip)
		if len(holders) < 2 {
			continue
		}
		s := Shared{Address: ip, Self: c.claimLocked(n, ip)}
		for _, h := range holders {
			if h.Name != n.Name {
				s.Others = append(s.Others, c.claimLocked(h, ip))
			}
		}
		shared = append(shared, s)
	}
	c.mu.Unlock()
	now := c.cfg.Now()
	v := Decide(shared, now, c.cfg.Window)
	if !v.RecheckAt.IsZero() {
		// Why nothing is written yet: a claim inside the move window (a move, until it ends).
		c.cfg.Logger.Debug("address shared inside the move window: decided again when it ends", "node", node,
			"recheck_in", v.RecheckAt.Sub(now).Round(time.Millisecond))
		c.queue.AddAfter(node, v.RecheckAt.Sub(now))
	}
	c.setFlagged(node, v)
	status, reason, msg := Condition(v, NotReady(n))
	want := Written{Status: status, Reason: reason, Message: msg}
	c.mu.Lock()
	current := Current(n)
	if w, ok := c.written[node]; ok {
		current = &w
	}
	c.mu.Unlock()
	if !Plan(current, want) {
		return nil
	}
	return c.write(ctx, n, current, want, v)
}

// claimLocked is n's claim on ip; c.mu is held.
func (c *Controller) claimLocked(n *corev1.Node, ip netip.Addr) Claim {
	b := c.since[claimKey{n.Name, ip}]
	return Claim{Node: n.Name, Since: b.at, First: b.first, NotReady: NotReady(n)}
}

// conditionPatch is the strategic merge patch of the condition (merged by type: the kubelet's
// conditions are left alone); lastTransitionTime only when the status changes.
func conditionPatch(current *Written, want Written, now time.Time) ([]byte, error) {
	cond := map[string]any{"type": vocab.ConditionAddressConflict, "status": want.Status, "reason": want.Reason,
		"message": want.Message, "lastHeartbeatTime": metav1.NewTime(now)}
	if current == nil || current.Status != want.Status {
		cond["lastTransitionTime"] = metav1.NewTime(now)
	}
	return json.Marshal(map[string]any{"status": map[string]any{"conditions": []any{cond}}})
}

// write patches the condition and says so: a Warning Event naming the other Nodes when a conflict
// begins or its Nodes change, a Normal one when it ends.
func (c *Controller) write(ctx context.Context, n *corev1.Node, current *Written, want Written, v Verdict) error {
	patch, err := conditionPatch(current, want, c.cfg.Now())
	if err != nil {
		return err
	}
	err = c.cfg.Source.PatchStatus(ctx, n.Name, patch)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("patch node %s condition %s: %w", n.Name, vocab.ConditionAddressConflict, err)
	}
	c.mu.Lock()
	c.written[n.Name] = want
	c.mu.Unlock()
	c.cfg.Metrics.writes.WithLabelValues(string(want.Status)).Inc()
	ref := &corev1.ObjectReference{Kind: "Node", Name: n.Name, UID: types.UID(n.Name)}
	if want.Status == corev1.ConditionTrue {
		c.cfg.Logger.Warn("address conflict", "node", n.Name, "reason", want.Reason, "others", fmt.Sprint(v.Others()), "message", want.Message)
		c.cfg.Recorder.Eventf(ref, corev1.EventTypeWarning, vocab.ReasonAddressConflict, "%s",
			vocab.EventMessage("Another Node lists an address of this Node: "+want.Message))
		return nil
	}
	c.cfg.Logger.Info("address conflict ended", "node", n.Name)
	c.cfg.Recorder.Eventf(ref, corev1.EventTypeNormal, vocab.ReasonAddressConflictResolved, "%s", want.Message)
	return nil
}
