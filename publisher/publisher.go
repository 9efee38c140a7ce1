package publisher

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/nodeaddr/nodeaddr/resolver"
)

// Event reasons on the Node.
const (
	ReasonAddressesUpdated     = "AddressesUpdated"
	ReasonTaintRemoved         = "TaintRemoved"
	ReasonAnnotationsUpdated   = "AnnotationsUpdated"
	ReasonAddressesOverwritten = "AddressesOverwritten"
	ReasonWriteFailed          = "AddressesWriteFailed"
	// ReasonProvidedNodeIPNotFound: the kubelet's provided-node-ip is not on the host.
	ReasonProvidedNodeIPNotFound = "ProvidedNodeIPNotFound"
	// ReasonProvidedNodeIPInvalid: the annotation cannot be parsed and is ignored.
	ReasonProvidedNodeIPInvalid = "ProvidedNodeIPInvalid"
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

// Observer receives what metrics need.
type Observer interface {
	OnWrite(kind, result string)
	OnReaction(d time.Duration)
	OnAddresses(addrs []resolver.Address)
	OnTaint(present bool)
	OnOverwrite()
	// OnOverwriteBackoff reports the current delay before rewriting reverted addresses (0: none).
	OnOverwriteBackoff(d time.Duration)
	// OnProvidedNodeIP reports whether the kubelet's provided node IP is missing from the host.
	OnProvidedNodeIP(missing bool)
}

// Config configures a Publisher.
type Config struct {
	NodeName string
	// Nodes is the Node API (a clientset's CoreV1().Nodes() will do).
	Nodes NodeClient
	// Managed lists the address types nodeaddr owns; every other entry is left alone.
	Managed     []resolver.AddressType
	RemoveTaint bool
	// KeepExternalEqualInternal publishes an ExternalIP even when it equals an InternalIP; by
	// default it is dropped (Compose).
	KeepExternalEqualInternal bool
	// Annotations are written from the published addresses (--annotations); other annotations are
	// left alone.
	Annotations []AnnotationSpec
	// Rate and Burst bound writes (both kinds together). The first write passes at once.
	Rate  rate.Limit
	Burst int
	// FieldManager names nodeaddr in managedFields.
	FieldManager string
	Recorder     record.EventRecorder
	Logger       *slog.Logger
	Observer     Observer
	// MinBackoff/MaxBackoff bound retries after failed writes; conflicts retry from MinBackoff/4.
	MinBackoff, MaxBackoff time.Duration
	// FailuresBeforeWarning is how many consecutive failed writes produce one Warning event.
	FailuresBeforeWarning int
	// OverwriteBackoff and OverwriteBackoffMax bound the delay before rewriting addresses another
	// writer keeps reverting (see RevertBackoff); defaults 10s and 10m.
	OverwriteBackoff, OverwriteBackoffMax time.Duration
	// OnNode, if set, is given the Node's pod CIDRs (the resolver excludes them from selection) and
	// its current managed addresses (the resolver keeps them among equal candidates) when the Node
	// is first seen and whenever its pod CIDRs change. It must not block.
	OnNode func(resolver.NodeView)
}

// Publisher reconciles one Node. Publish may be called from any goroutine; Run owns all API calls.
type Publisher struct {
	cfg     Config
	log     *slog.Logger
	obs     Observer
	limiter *rate.Limiter
	dirty   chan struct{}

	mu       sync.Mutex
	desired  *resolver.State
	since    time.Time    // first kernel event behind the unwritten desired state
	node     *corev1.Node // freshest copy known: informer, write response or re-read
	written  []corev1.NodeAddress
	writeRV  string // resourceVersion our last address write produced
	reverted bool   // an overwrite of our last write was already counted
	// inflight is the managed list of the address write under way: the watch may deliver our own
	// write before the PATCH response returns, and that echo is not another writer's change.
	inflight []corev1.NodeAddress
	fight    RevertBackoff

	ready    atomic.Bool
	synced   atomic.Bool
	failures int
	warned   bool

	podCIDRs     []netip.Prefix // last given to OnNode (under mu)
	podCIDRsSent bool
	nodeIPWarned string // the provided-node-ip problem last warned about ("" none); worker only
}

// New returns a publisher. Nothing happens until Run.
func New(cfg Config) *Publisher {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Recorder == nil {
		cfg.Recorder = &record.FakeRecorder{}
	}
	if cfg.FieldManager == "" {
		cfg.FieldManager = "nodeaddr"
	}
	if cfg.Burst < 1 {
		cfg.Burst = 1
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = 500 * time.Millisecond
	}
	if cfg.MaxBackoff < cfg.MinBackoff {
		cfg.MaxBackoff = 60 * time.Second
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
	obs := cfg.Observer
	if obs == nil {
		obs = nopObserver{}
	}
	return &Publisher{
		cfg:     cfg,
		log:     cfg.Logger.With("node", cfg.NodeName),
		obs:     obs,
		limiter: rate.NewLimiter(cfg.Rate, cfg.Burst),
		dirty:   make(chan struct{}, 1),
		fight: RevertBackoff{Threshold: 3, Window: 2 * time.Minute,
			Base: cfg.OverwriteBackoff, Max: cfg.OverwriteBackoffMax},
	}
}

type nopObserver struct{}

func (nopObserver) OnWrite(string, string)           {}
func (nopObserver) OnReaction(time.Duration)         {}
func (nopObserver) OnAddresses([]resolver.Address)   {}
func (nopObserver) OnTaint(bool)                     {}
func (nopObserver) OnOverwrite()                     {}
func (nopObserver) OnOverwriteBackoff(time.Duration) {}
func (nopObserver) OnProvidedNodeIP(bool)            {}

// Publish sets the desired state (latest wins) and wakes the worker. It never blocks.
func (p *Publisher) Publish(s resolver.State, since time.Time) {
	p.mu.Lock()
	if p.desired == nil || !p.desired.Equal(s) {
		p.obs.OnAddresses(s.Addresses)
		if !since.IsZero() && (p.since.IsZero() || since.Before(p.since)) {
			p.since = since
		}
	}
	p.desired = &s
	p.mu.Unlock()
	p.wake()
}

func (p *Publisher) wake() {
	select {
	case p.dirty <- struct{}{}:
	default:
	}
}

// Ready reports whether the Node has been reconciled and no needed write is failing.
func (p *Publisher) Ready() bool { return p.ready.Load() }

// Run watches the Node and reconciles until ctx ends.
func (p *Publisher) Run(ctx context.Context) error {
	// One informer on one Node, built directly rather than through an informer factory (which
	// links every API group's informers and clients).
	selector := fields.OneTermEqualSelector("metadata.name", p.cfg.NodeName).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = selector
			return p.cfg.Nodes.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = selector
			return p.cfg.Nodes.Watch(ctx, o)
		},
	}
	// The client says whether it can serve streaming lists (fake clientsets cannot).
	inf := cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, p.cfg.Nodes),
		&corev1.Node{}, 0, cache.Indexers{})
	if err := inf.SetTransform(trimTransform); err != nil {
		return fmt.Errorf("node informer transform: %w", err)
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { p.observe(o) },
		UpdateFunc: func(_, o any) { p.observe(o) },
		DeleteFunc: func(o any) { p.forget(o) },
	}); err != nil {
		return fmt.Errorf("add node event handler: %w", err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wg.Go(func() { inf.RunWithContext(ctx) })
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return ctx.Err()
	}
	p.synced.Store(true)
	p.mu.Lock()
	missing := p.node == nil
	p.mu.Unlock()
	if missing {
		p.log.Warn("node not found, waiting for it to be created")
	}
	p.wake()
	p.work(ctx)
	return nil
}
