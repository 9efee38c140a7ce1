package publisher

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/nodeaddr/nodeaddr/publisher/identity"
	"github.com/nodeaddr/nodeaddr/resolver"
)

// DefaultFieldManager names nodeaddr in managedFields when Config.FieldManager is empty.
const DefaultFieldManager = identity.FieldManager

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
	Annotations []AnnotationSpec
	// Rate and Burst bound writes (both kinds together). The first write passes at once.
	Rate  rate.Limit
	Burst int
	// Node is the agent's view of the Node, which the publisher reads and never modifies.
	Node NodeView
	// FieldManager names nodeaddr in managedFields.
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
	if cfg.Node == nil { // no Node yet: Publish and Reconcile wait for one
		cfg.Node = NewNodeView(cache.NewStore(cache.MetaNamespaceKeyFunc), cfg.NodeName)
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
		cfg.FieldManager = DefaultFieldManager
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

// NodeEvents is the publisher's part of the agent's Node informer handler (node.go).
func (p *Publisher) NodeEvents() cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{AddFunc: p.onNode, UpdateFunc: p.onUpdate, DeleteFunc: p.onDelete}
}

// Run reconciles until ctx ends, once the informer behind cfg.Node has synced with NodeEvents.
func (p *Publisher) Run(ctx context.Context) error {
	go func() {
		<-ctx.Done()
		p.queue.ShutDown()
	}()
	if p.nodes.get() == nil {
		p.log.Warn("node not found, waiting for it to be created")
	}
	p.queue.Add()
	for p.processNext(ctx) {
	}
	return nil
}
