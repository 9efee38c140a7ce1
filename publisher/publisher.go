package publisher

import (
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/nodeaddr/nodeaddr/internal/vocab"
	"github.com/nodeaddr/nodeaddr/resolver"
)

// Write kinds and results, the labels of nodeaddr_node_writes_total.
const (
	KindAddresses   = "addresses"
	KindAnnotations = "annotations"
	KindTaint       = "taint"

	ResultSuccess  = "success"
	ResultConflict = "conflict"
	ResultError    = "error"
)

// WriteKinds lists every write kind, for metrics to create each series up front.
func WriteKinds() []string { return []string{KindAddresses, KindAnnotations, KindTaint} }

// WriteResults lists every write result, for metrics to create each series up front.
func WriteResults() []string { return []string{ResultSuccess, ResultConflict, ResultError} }

// Config configures a Publisher.
type Config struct {
	NodeName string
	// Nodes is the Node API (a clientset's CoreV1().Nodes() will do).
	Nodes NodeClient
	// Managed lists the address types nodeaddr owns; every other entry is left alone.
	Managed     []resolver.AddressType
	RemoveTaint bool
	// Annotations are written from the published addresses (--annotations).
	Annotations []vocab.AnnotationSpec
	// Rate and Burst bound writes (both kinds together). The first write passes at once.
	Rate  rate.Limit
	Burst int
	// Node is the agent's view of the Node, which the publisher reads and never modifies.
	Node NodeView
	// FieldManager names nodeaddr in managedFields (default vocab.FieldManager).
	FieldManager string
	Recorder     record.EventRecorder
	Logger       *slog.Logger
	// Metrics, if set, counts writes and overwrites (NewMetrics).
	Metrics *Metrics
	// MinBackoff and MaxBackoff (default 20 s) shape the retries of failed writes (retrySchedule);
	// conflicts retry after MinBackoff/4.
	MinBackoff, MaxBackoff time.Duration
	// FailuresBeforeWarning is how many consecutive failed writes produce one Warning event.
	FailuresBeforeWarning int
	// OverwriteBackoff and OverwriteBackoffMax (defaults 10s and 10m) bound revertBackoff.
	OverwriteBackoff, OverwriteBackoffMax time.Duration
}

// Publisher reconciles one Node: informer events and Publish enqueue it, one worker reconciles it
// (reconcile.go). Publish may be called from any goroutine.
type Publisher struct {
	cfg   Config
	log   *slog.Logger
	nodes *nodeCache
	queue *queue
	// retry schedules the attempts after failed reconciles, the worker's and --run-once's.
	retry   *retrySchedule
	limiter *rate.Limiter
	health  health

	mu      sync.Mutex
	desired *resolver.State
	since   time.Time // first kernel event behind the unwritten desired state
	detect  overwriteDetector

	nodeIPWarned string // the provided-node-ip problem last warned about ("" none); worker only
}

// New returns a publisher. Nothing happens until Run or Reconcile.
func New(cfg Config) *Publisher {
	cfg = withDefaults(cfg)
	if cfg.Node == nil {
		cfg.Node = noNode{}
	}
	return &Publisher{
		cfg:     cfg,
		log:     cfg.Logger.With("node", cfg.NodeName),
		nodes:   &nodeCache{view: cfg.Node},
		queue:   newQueue(),
		retry:   newRetrySchedule(cfg.MinBackoff, cfg.MaxBackoff),
		limiter: rate.NewLimiter(cfg.Rate, cfg.Burst),
		health:  health{warnAfter: cfg.FailuresBeforeWarning},
		detect: overwriteDetector{managed: cfg.Managed, fieldManager: cfg.FieldManager,
			fight: revertBackoff{Threshold: 3, Window: 2 * time.Minute, Base: cfg.OverwriteBackoff, Max: cfg.OverwriteBackoffMax}},
	}
}

func withDefaults(cfg Config) Config {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Recorder == nil {
		cfg.Recorder = &record.FakeRecorder{}
	}
	if cfg.FieldManager == "" {
		cfg.FieldManager = vocab.FieldManager
	}
	cfg.Burst = max(cfg.Burst, 1)
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = 500 * time.Millisecond
	}
	if cfg.MaxBackoff < cfg.MinBackoff {
		cfg.MaxBackoff = max(20*time.Second, cfg.MinBackoff)
	}
	if cfg.FailuresBeforeWarning <= 0 {
		cfg.FailuresBeforeWarning = 3
	}
	if cfg.OverwriteBackoff <= 0 {
		cfg.OverwriteBackoff = 10 * time.Second
	}
	if cfg.OverwriteBackoffMax < cfg.OverwriteBackoff {
		cfg.OverwriteBackoffMax = max(10*time.Minute, cfg.OverwriteBackoff)
	}
	return cfg
}

// Publish sets the desired state (latest wins) and enqueues the Node. It never blocks. s is what
// the Node's managed types must hold; the publisher merges it with the other writers' entries.
func (p *Publisher) Publish(s resolver.State, since time.Time) {
	p.mu.Lock()
	changed := resolver.Changed(p.desired, s)
	if changed && !since.IsZero() && (p.since.IsZero() || since.Before(p.since)) {
		p.since = since
	}
	// So do the provided-node-ip and equal-ExternalIP outcomes: the taint and warnings follow them.
	changed = changed || !p.desired.NodeIP.Equal(s.NodeIP) || p.desired.DroppedEqual != s.DroppedEqual
	p.desired = &s
	p.mu.Unlock()
	// The same state again (a resync) needs no reconcile: one that failed is already scheduled by
	// the retry backoff, which this must not bypass.
	if changed {
		p.queue.Add()
	}
}

// DesiredAddresses returns the addresses last published (metrics read them at scrape time).
func (p *Publisher) DesiredAddresses() []resolver.Address {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.desired == nil {
		return nil
	}
	return slices.Clone(p.desired.Addresses)
}

// Managed returns the address types the publisher manages (metrics read them at scrape time).
func (p *Publisher) Managed() []resolver.AddressType { return slices.Clone(p.cfg.Managed) }

// Tainted reports whether the Node, as the publisher has it, carries the uninitialized taint.
func (p *Publisher) Tainted() bool {
	n := p.nodes.get()
	return n != nil && hasUninitialized(n)
}

// Ready reports whether the Node has been reconciled and no needed write is failing.
func (p *Publisher) Ready() bool { return p.health.ready.Load() }

// NodeEvents is the publisher's part of the agent's Node informer handler.
func (p *Publisher) NodeEvents() cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{AddFunc: p.onNode, UpdateFunc: p.onUpdate, DeleteFunc: p.onDelete}
}

// onNode takes an added or updated Node from the informer.
func (p *Publisher) onNode(o any) {
	n, ok := o.(*corev1.Node)
	if !ok || n.Name != p.cfg.NodeName {
		return
	}
	p.nodes.informed(n)
	p.mu.Lock()
	ow := p.detect.observe(n, time.Now())
	p.mu.Unlock()
	if ow != nil {
		p.reportOverwrite(ow)
	}
	p.queue.Add()
}

// reportOverwrite logs, counts and records another writer's change of our addresses.
func (p *Publisher) reportOverwrite(ow *overwrite) {
	p.cfg.Metrics.overwritten(ow.delay)
	p.log.Warn("another writer changed the managed addresses", "reason", "overwritten",
		"writer", ow.writer, "ours", fmt.Sprint(ow.ours), "theirs", fmt.Sprint(ow.theirs), "rewrite_in", ow.delay)
	p.cfg.Recorder.Eventf(ow.node, corev1.EventTypeWarning, vocab.ReasonAddressesOverwritten,
		"%s replaced the addresses nodeaddr wrote (%v with %v); %s", ow.writer, ow.ours, ow.theirs, overwriteAdvice(ow.node))
}

// overwriteAdvice says how to end a fight over the addresses: a providerID is the sign of a cloud
// controller manager in a hybrid cluster, and there the fix is to keep nodeaddr off that Node.
func overwriteAdvice(n *corev1.Node) string {
	const kubelet = "if it is the kubelet, run it with --cloud-provider=external"
	if id := n.Spec.ProviderID; id != "" {
		return fmt.Sprintf("if it is a cloud controller manager (the Node has providerID %q), run nodeaddr only on "+
			"the Nodes no cloud controller manager manages (docs/hybrid-clusters.md); %s", id, kubelet)
	}
	return kubelet
}

// onUpdate takes an updated Node from the informer, unless its resourceVersion is the old one: the
// relist after a broken watch, which would let a fleet bypass its retry backoff when the server is back.
func (p *Publisher) onUpdate(old, o any) {
	if unchanged(old, o) {
		return
	}
	p.onNode(o)
}

// unchanged reports whether an informer update carries the same Node revision as before.
func unchanged(old, o any) bool {
	on, ok1 := old.(*corev1.Node)
	nn, ok2 := o.(*corev1.Node)
	return ok1 && ok2 && on.ResourceVersion != "" && on.ResourceVersion == nn.ResourceVersion
}

// onDelete takes the Node's deletion from the informer.
func (p *Publisher) onDelete(o any) {
	if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = d.Obj
	}
	n, ok := o.(*corev1.Node)
	if !ok || n.Name != p.cfg.NodeName {
		return
	}
	p.mu.Lock()
	p.detect.forget()
	p.mu.Unlock()
	p.health.ready.Store(false)
	p.log.Warn("node deleted, waiting for it to be created again")
	p.queue.Add()
}

func hasUninitialized(n *corev1.Node) bool {
	_, found := withoutUninitialized(n.Spec.Taints)
	return found
}
