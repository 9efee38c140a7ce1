package publisher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

// observe takes a Node from the informer.
func (p *Publisher) observe(o any) {
	n, ok := o.(*corev1.Node)
	if !ok || n.Name != p.cfg.NodeName {
		return
	}
	p.mu.Lock()
	if newer(n, p.node) {
		p.node = n
		p.checkOverwrite(n)
	}
	cidrs := podCIDRs(p.node)
	send := p.cfg.OnNode != nil && (!p.podCIDRsSent || !slices.Equal(cidrs, p.podCIDRs))
	var view resolver.NodeView
	if send {
		p.podCIDRs, p.podCIDRsSent = cidrs, true
		view = p.nodeView(p.node)
	}
	p.mu.Unlock()
	if send {
		if len(cidrs) > 0 {
			p.log.Info("node's pod CIDRs", "pod_cidrs", fmt.Sprint(cidrs))
		}
		p.cfg.OnNode(view)
	}
	p.obs.OnTaint(hasUninitialized(n))
	p.wake()
}

// nodeView is what the resolver needs to know of n.
func (p *Publisher) nodeView(n *corev1.Node) resolver.NodeView {
	return resolver.NodeView{PodCIDRs: podCIDRs(n), Addresses: InStatusOrder(n.Status.Addresses, p.cfg.Managed, nil)}
}

// checkOverwrite counts a change of our managed entries made by someone else after our last write.
// Caller holds mu.
func (p *Publisher) checkOverwrite(n *corev1.Node) {
	if p.written == nil || p.reverted || n.ResourceVersion == p.writeRV || !newerRV(n.ResourceVersion, p.writeRV) {
		return
	}
	got := Managed(n.Status.Addresses, p.cfg.Managed)
	if p.inflight != nil && slices.Equal(got, p.inflight) {
		// The echo of our own write, arriving before its response, or of one that failed on our
		// side (a timeout) although the API server applied it: it is what we wrote.
		p.written, p.writeRV, p.inflight = got, n.ResourceVersion, nil
		return
	}
	if !slices.Equal(got, p.written) {
		p.reverted = true
		p.obs.OnOverwrite()
		delay := p.fight.Revert(time.Now())
		p.obs.OnOverwriteBackoff(delay)
		who := lastStatusWriter(n, p.cfg.FieldManager)
		p.log.Warn("another writer changed the managed addresses", "reason", "overwritten",
			"writer", who, "ours", fmt.Sprint(p.written), "theirs", fmt.Sprint(got), "rewrite_in", delay)
		p.cfg.Recorder.Eventf(n, corev1.EventTypeWarning, ReasonAddressesOverwritten,
			"%s replaced the addresses nodeaddr wrote (%v with %v); if it is the kubelet, run it with --cloud-provider=external",
			who, p.written, got)
	}
}

// lastStatusWriter names the most recent other manager of status fields, from managedFields.
func lastStatusWriter(n *corev1.Node, self string) string {
	var who string
	var at time.Time
	for _, m := range n.ManagedFields {
		if m.Manager == self || m.Subresource != "status" {
			continue
		}
		if m.Time != nil && !m.Time.Time.Before(at) {
			who, at = m.Manager, m.Time.Time
		}
	}
	if who == "" {
		return "another writer"
	}
	return who
}

func (p *Publisher) forget(o any) {
	if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = d.Obj
	}
	n, ok := o.(*corev1.Node)
	if !ok || n.Name != p.cfg.NodeName {
		return
	}
	p.mu.Lock()
	p.node, p.written, p.writeRV, p.reverted, p.inflight = nil, nil, "", false, nil
	p.mu.Unlock()
	p.ready.Store(false)
	p.log.Warn("node deleted, waiting for it to be created again")
}

func hasUninitialized(n *corev1.Node) bool {
	_, found := WithoutUninitialized(n.Spec.Taints)
	return found
}

// work is the single writer: it waits for a wake-up, reconciles, and retries failures with backoff.
func (p *Publisher) work(ctx context.Context) {
	var retry <-chan time.Time
	var timer *time.Timer
	backoff := p.cfg.MinBackoff
	for {
		select {
		case <-ctx.Done():
			if timer != nil {
				timer.Stop()
			}
			return
		case <-p.dirty:
		case <-retry:
		}
		err := p.reconcile(ctx)
		if ctx.Err() != nil {
			return
		}
		if timer != nil {
			timer.Stop()
			retry = nil
		}
		if err == nil {
			backoff = p.cfg.MinBackoff
			continue
		}
		delay := backoff
		var hold holdError
		if errors.As(err, &hold) {
			delay = time.Until(hold.until)
		} else if errors.Is(err, errConflict) {
			delay = max(p.cfg.MinBackoff/4, time.Millisecond)
		} else {
			backoff = min(2*backoff, p.cfg.MaxBackoff)
		}
		timer = time.NewTimer(delay)
		retry = timer.C
	}
}

var errConflict = errors.New("conflict")

// holdError defers a rewrite of reverted addresses until the revert backoff allows it.
type holdError struct{ until time.Time }

func (h holdError) Error() string { return "rewrite held back until " + h.until.Format(time.RFC3339) }

// reconcile makes one pass: write the addresses if they differ, then remove the taint if it is
// there and the addresses are right. A nil error means nothing is left to do for now.
func (p *Publisher) reconcile(ctx context.Context) error {
	node, desired, _ := p.snapshot()
	if desired == nil || node == nil {
		return nil // nothing resolved yet, or the Node does not exist: a later event wakes us
	}
	nip := p.nodeIP(node, desired)
	next := Compose(node.Status.Addresses, desired.Managed, nip.Addresses, p.cfg.KeepExternalEqualInternal)
	if !slices.Equal(next, node.Status.Addresses) {
		if until := p.holdUntil(); !until.IsZero() {
			return holdError{until}
		}
		if err := p.limiter.Wait(ctx); err != nil {
			return err
		}
		// Latest state wins: the desired state and the Node may have moved during the wait.
		var since time.Time
		node, desired, since = p.snapshot()
		if desired == nil || node == nil {
			return nil
		}
		nip = p.nodeIP(node, desired)
		next = Compose(node.Status.Addresses, desired.Managed, nip.Addresses, p.cfg.KeepExternalEqualInternal)
		if !slices.Equal(next, node.Status.Addresses) {
			if err := p.writeAddresses(ctx, node, next, since); err != nil {
				return err
			}
			if node, _, _ = p.snapshot(); node == nil {
				return nil // deleted meanwhile (forget)
			}
		}
	} else {
		p.clearSince()
	}
	p.reportNodeIP(node, nip)
	node, err := p.syncAnnotations(ctx, node, nip.Addresses)
	if err != nil || node == nil {
		return err
	}
	if p.cfg.RemoveTaint && len(nip.Addresses) > 0 && len(nip.Missing) == 0 && hasUninitialized(node) {
		if err := p.limiter.Wait(ctx); err != nil {
			return err
		}
		if err := p.removeTaint(ctx, node); err != nil {
			return err
		}
	}
	p.ready.Store(true)
	return nil
}

// syncAnnotations writes the configured annotations for the addresses on the Node (before the taint
// goes, so consumers waiting for them find them). It returns the freshest Node, nil if it vanished.
func (p *Publisher) syncAnnotations(ctx context.Context, node *corev1.Node, resolved []resolver.Address) (*corev1.Node, error) {
	changes := func(n *corev1.Node) map[string]string {
		return AnnotationChanges(n.Annotations, p.cfg.Annotations,
			InStatusOrder(n.Status.Addresses, p.cfg.Managed, resolved))
	}
	if len(p.cfg.Annotations) == 0 || changes(node) == nil {
		return node, nil
	}
	if err := p.limiter.Wait(ctx); err != nil {
		return nil, err
	}
	if node, _, _ = p.snapshot(); node == nil {
		return nil, nil
	}
	ch := changes(node) // the Node may have moved during the wait
	if ch == nil {
		return node, nil
	}
	pt, data, err := annotationsPatch(node, ch)
	if err != nil {
		return nil, err
	}
	res, err := p.cfg.Nodes.Patch(ctx, node.Name, pt, data,
		metav1.PatchOptions{FieldManager: p.cfg.FieldManager})
	if err != nil {
		return nil, p.failed(ctx, KindAnnotations, node, err)
	}
	p.succeeded(KindAnnotations)
	p.mu.Lock()
	if newer(res, p.node) {
		p.node = res
	}
	p.mu.Unlock()
	desc := make([]string, 0, len(ch))
	for _, a := range p.cfg.Annotations {
		if v, ok := ch[a.Key]; ok {
			desc = append(desc, fmt.Sprintf("%s=%q", a.Key, v))
		}
	}
	p.log.Info("annotations updated", "reason", "addresses-changed", "annotations", strings.Join(desc, " "),
		"resourceVersion", res.ResourceVersion)
	p.cfg.Recorder.Eventf(res, corev1.EventTypeNormal, ReasonAnnotationsUpdated, "Annotations set: %s", strings.Join(desc, " "))
	return res, nil
}

// nodeIP applies the kubelet's provided-node-ip annotation to the desired state.
func (p *Publisher) nodeIP(node *corev1.Node, desired *resolver.State) NodeIPResult {
	return ApplyProvidedNodeIP(node.Annotations[AnnotationProvidedNodeIP], *desired)
}

// reportNodeIP warns once per distinct problem with the provided node IP (log, Warning event,
// metric) and says so when it is solved. Called by the worker only.
func (p *Publisher) reportNodeIP(node *corev1.Node, r NodeIPResult) {
	p.obs.OnProvidedNodeIP(len(r.Missing) > 0)
	var key string
	switch {
	case r.Err != nil:
		key = r.Err.Error()
		if key != p.nodeIPWarned {
			p.log.Warn("provided node IP ignored", "reason", "invalid-annotation", "err", r.Err)
			p.cfg.Recorder.Eventf(node, corev1.EventTypeWarning, ReasonProvidedNodeIPInvalid,
				"Ignoring %v", r.Err)
		}
	case len(r.Missing) > 0:
		key = fmt.Sprint(r.Provided, r.Missing)
		if key != p.nodeIPWarned {
			p.log.Warn("provided node IP is not on this host: keeping the uninitialized taint",
				"reason", "provided-node-ip-not-found", "address", fmt.Sprint(r.Missing),
				"annotation", node.Annotations[AnnotationProvidedNodeIP])
			p.cfg.Recorder.Eventf(node, corev1.EventTypeWarning, ReasonProvidedNodeIPNotFound,
				"The kubelet's node IP %v (annotation %s) is not assigned to this host; the node keeps the %s taint until it is (check the kubelet's --node-ip)",
				r.Missing, AnnotationProvidedNodeIP, UninitializedTaint)
		}
	default:
		if p.nodeIPWarned != "" {
			p.log.Info("provided node IP problem resolved", "address", fmt.Sprint(r.Provided))
		}
	}
	p.nodeIPWarned = key
}

// holdUntil returns when a rewrite fought over with another writer may happen, zero if now.
func (p *Publisher) holdUntil() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	if nb := p.fight.NotBefore(); time.Now().Before(nb) {
		return nb
	}
	return time.Time{}
}

func (p *Publisher) snapshot() (*corev1.Node, *resolver.State, time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.node, p.desired, p.since
}

func (p *Publisher) clearSince() {
	p.mu.Lock()
	p.since = time.Time{}
	p.mu.Unlock()
}

func (p *Publisher) writeAddresses(ctx context.Context, node *corev1.Node, next []corev1.NodeAddress, since time.Time) error {
	pt, data, err := addressesPatch(node, next)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.inflight = Managed(next, p.cfg.Managed)
	p.mu.Unlock()
	res, err := p.cfg.Nodes.Patch(ctx, node.Name, pt, data,
		metav1.PatchOptions{FieldManager: p.cfg.FieldManager}, "status")
	if err != nil {
		// inflight stays: a write that timed out may still have been applied, and its echo is no
		// other writer's.
		return p.failed(ctx, KindAddresses, node, err)
	}
	p.succeeded(KindAddresses)
	trimNode(res)
	old := Managed(node.Status.Addresses, p.cfg.Managed)
	now := Managed(res.Status.Addresses, p.cfg.Managed)
	p.mu.Lock()
	if newer(res, p.node) {
		p.node = res
	}
	// inflight hands over to written in one step: a watch echo of this write that arrives in
	// between would otherwise compare with the previous write and count as another writer's
	// revert (seen in the latency benchmark: false AddressesOverwritten and a 40 s back-off).
	p.inflight = nil
	p.written, p.writeRV, p.reverted = now, res.ResourceVersion, false
	if p.since.Equal(since) {
		p.since = time.Time{}
	}
	p.mu.Unlock()
	if !since.IsZero() {
		p.obs.OnReaction(time.Since(since))
	}
	p.log.Info("addresses updated", "reason", "desired-changed", "old", fmt.Sprint(old), "new", fmt.Sprint(now),
		"resourceVersion", res.ResourceVersion)
	p.cfg.Recorder.Eventf(res, corev1.EventTypeNormal, ReasonAddressesUpdated, "Addresses changed from %v to %v", old, now)
	return nil
}

func (p *Publisher) removeTaint(ctx context.Context, node *corev1.Node) error {
	next, _ := WithoutUninitialized(node.Spec.Taints)
	pt, data, err := taintsPatch(node, next)
	if err != nil {
		return err
	}
	res, err := p.cfg.Nodes.Patch(ctx, node.Name, pt, data,
		metav1.PatchOptions{FieldManager: p.cfg.FieldManager})
	if err != nil {
		return p.failed(ctx, KindTaint, node, err)
	}
	p.succeeded(KindTaint)
	trimNode(res)
	p.mu.Lock()
	if newer(res, p.node) {
		p.node = res
	}
	p.mu.Unlock()
	p.obs.OnTaint(false)
	p.log.Info("uninitialized taint removed", "reason", "addresses-reconciled")
	p.cfg.Recorder.Event(res, corev1.EventTypeNormal, ReasonTaintRemoved,
		"Removed taint "+UninitializedTaint+": nodeaddr has set the node addresses")
	return nil
}

func (p *Publisher) succeeded(kind string) {
	p.obs.OnWrite(kind, ResultSuccess)
	p.failures, p.warned = 0, false
}

// failed classifies a failed write. A conflict re-reads the Node (the cache may lag the server) and
// asks for a quick retry; anything else backs off, turns readiness off and, when it persists, emits
// one Warning event. A missing Node is not counted as a failure (the informer reports its deletion
// and re-creation), but the error is returned: nothing was written, so the caller must neither go on
// to the taint nor report the Node ready, and ReconcileOnce waits for the Node.
func (p *Publisher) failed(ctx context.Context, kind string, node *corev1.Node, err error) error {
	if isConflict(err) {
		p.obs.OnWrite(kind, ResultConflict)
		p.log.Info("write conflicted, re-reading the node", "kind", kind, "reason", "conflict", "err", err)
		fresh, gerr := p.cfg.Nodes.Get(ctx, node.Name, metav1.GetOptions{})
		if gerr == nil {
			trimNode(fresh)
			p.mu.Lock()
			if newer(fresh, p.node) {
				p.node = fresh
			}
			p.mu.Unlock()
		}
		return errConflict
	}
	p.obs.OnWrite(kind, ResultError)
	if apierrors.IsNotFound(err) {
		p.log.Warn("node disappeared during the write", "kind", kind)
		return err
	}
	p.failures++
	p.ready.Store(false)
	p.log.Error("write failed", "kind", kind, "err", err, "consecutive_failures", p.failures)
	if p.failures >= p.cfg.FailuresBeforeWarning && !p.warned {
		p.warned = true
		p.cfg.Recorder.Eventf(node, corev1.EventTypeWarning, ReasonWriteFailed,
			"nodeaddr failed %d times in a row to write %s: %v", p.failures, kind, err)
	}
	return err
}

// newer reports whether a is a later observation of the Node than b. resourceVersions are opaque
// strings by contract; the API server backed by etcd issues increasing integers, which is what this
// relies on, with "different" as the fallback.
func newer(a, b *corev1.Node) bool {
	if a == nil {
		return false
	}
	if b == nil || a.UID != b.UID {
		return true
	}
	return newerRV(a.ResourceVersion, b.ResourceVersion)
}

func newerRV(a, b string) bool {
	x, errA := strconv.ParseUint(a, 10, 64)
	y, errB := strconv.ParseUint(b, 10, 64)
	if errA != nil || errB != nil {
		return a != b
	}
	return x > y
}
