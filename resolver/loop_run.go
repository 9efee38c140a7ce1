package resolver

import (
	"context"
	"log/slog"
	"net/netip"
	"slices"
	"sync/atomic"
	"time"
)

// Trigger delivers coalesced "something changed" signals (the watcher's Signal).
type Trigger interface {
	C() <-chan struct{}
	// Take clears the pending signal and returns when its first event happened.
	Take() time.Time
}

// LinkTrigger is a Trigger that also says whether its burst had link events (the watcher's Signal).
type LinkTrigger interface {
	// TakeLink clears and returns when the burst's latest link event happened (zero: none).
	TakeLink() time.Time
}

// Sink receives every resolved state. It is called from the loop's goroutine and must not block.
type Sink interface {
	// Publish hands over the desired state; since is its first kernel event (zero: none).
	Publish(s State, since time.Time)
}

// RuleTables is a Kernel that can list the routing tables policy rules point lookups at (Netlink),
// for the watcher's route filter (RouteTableFilter).
type RuleTables interface {
	RuleTables() ([]int, error)
}

// RouteTableFilter takes the tables RuleTables lists, after each resolution (the watcher).
type RouteTableFilter interface {
	SetRouteTables(tables []int)
}

// Results of a resolution, the "result" label of nodeaddr_resolutions_total.
const (
	ResultSuccess = "success"
	ResultError   = "error"
)

// LoopConfig configures Loop.
type LoopConfig struct {
	Kernel Kernel
	Policy Policy
	// Debounce is the quiet after address, route and rule events; LinkDebounce the hold after a
	// link event (at least Debounce); MaxDelay caps both from a burst's first event.
	Debounce       time.Duration
	LinkDebounce   time.Duration
	MaxDelay       time.Duration
	RemovalGrace   time.Duration
	ResyncInterval time.Duration
	// RetryInterval is how soon a failed resolution is tried again; default 1s.
	RetryInterval time.Duration
	// RouteTables, if set, is told the routing tables of policy rules after each resolution.
	RouteTables RouteTableFilter
	// Node, if set, returns the Node as the agent's informer has it (ok false: not seen yet). The
	// first resolution then waits for the Node, so that a restarted agent keeps the Node's current
	// addresses among equal candidates. NodeChanged tells the loop to look again.
	Node func() (NodeInput, bool)
	// Discovery, if set, supplies the ExternalIP behind NAT (stage_discovery.go).
	Discovery Discovery
	Logger    *slog.Logger
	// Metrics, if set, counts resolutions and resyncs (NewMetrics).
	Metrics *Metrics
}

// Loop runs the address pipeline (pipeline.go) on each trigger and hands the result to a Sink.
type Loop struct {
	cfg      LoopConfig
	trigger  Trigger
	sink     Sink
	lastTurn atomic.Int64 // unix nanos of the last loop iteration, for health
	awaiting atomic.Bool  // Run waits for the Node
	nodeKick chan struct{}
}

// NodeInput is what a resolution takes from the cluster: the Node (resolverInputOf) and the API server.
type NodeInput struct {
	// APIServer are the API server's own addresses, for the apiserver target (stage_apiserver.go).
	APIServer []netip.Addr
	PodCIDRs  []netip.Prefix // excluded from selection
	Addresses []Address      // the Node's current addresses of the managed types
	// Unmanaged are the Node's entries of the types nodeaddr does not manage (stage_equal.go).
	Unmanaged []Address
	// ProvidedNodeIP is the kubelet's provided-node-ip annotation ("" when there is none).
	ProvidedNodeIP string
}

// NewLoop returns a loop reading changes from trigger and publishing to sink.
func NewLoop(cfg LoopConfig, trigger Trigger, sink Sink) *Loop {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.RetryInterval <= 0 {
		cfg.RetryInterval = time.Second
	}
	if cfg.Node == nil { // the Node is not read: seen at once, with nothing in it
		cfg.Node = func() (NodeInput, bool) { return NodeInput{}, true }
	}
	l := &Loop{cfg: cfg, trigger: trigger, sink: sink, nodeKick: make(chan struct{}, 1)}
	l.lastTurn.Store(time.Now().UnixNano())
	return l
}

// NodeChanged tells the loop the Node may have changed (run.nodeChanged). It never blocks.
func (l *Loop) NodeChanged() {
	select {
	case l.nodeKick <- struct{}{}:
	default:
	}
}

// LastTurn returns when the loop last woke up; now while it waits for the Node (no stall).
func (l *Loop) LastTurn() time.Time {
	if l.awaiting.Load() {
		return time.Now()
	}
	return time.Unix(0, l.lastTurn.Load())
}

// Run resolves once at start (after the Node is seen) and then on every trigger until ctx ends.
func (l *Loop) Run(ctx context.Context) {
	r := newRun(l)
	defer r.wake.Stop()
	var resync <-chan time.Time
	if l.cfg.ResyncInterval > 0 {
		t := time.NewTicker(l.cfg.ResyncInterval)
		defer t.Stop()
		resync = t.C
	}
	var discovered <-chan struct{} // nil (never ready) without discovery
	if l.cfg.Discovery != nil {
		discovered = l.cfg.Discovery.C()
	}
	if !r.awaitNode(ctx) {
		return
	}
	r.resolve("start")
	for {
		r.arm()
		select {
		case <-ctx.Done():
			return
		case <-l.trigger.C():
			first := l.trigger.Take()
			var link time.Time
			if lt, ok := l.trigger.(LinkTrigger); ok {
				link = lt.TakeLink()
			}
			r.event(first, !link.IsZero())
		case <-l.nodeKick:
			r.nodeChanged()
		case <-discovered:
			r.resolve("external-address-discovered")
		case now := <-resync:
			l.cfg.Metrics.resync(now)
			r.resolve("resync")
		case <-r.wake.C:
			r.due(time.Now())
		}
		l.lastTurn.Store(time.Now().UnixNano())
	}
}

// run is the state of one Loop.Run: the pending burst, the deadlines and what was published.
type run struct {
	l         *Loop
	deb       debouncer
	hold      holdDown
	since     time.Time // first event of the pending burst
	kernel    *State    // the last result of the kernel's stages (selection, discovery, hold-down)
	published *State
	node      NodeInput   // the Node as last read
	wake      *time.Timer // fires for debounce, hold-down and retry deadlines
	holdUntil time.Time
	retryAt   time.Time
	waited    string // which debounce hold the resolution under way waited for ("" but after netlink events)
}

func newRun(l *Loop) *run {
	return &run{l: l, deb: debouncer{Quiet: l.cfg.Debounce, LinkQuiet: max(l.cfg.LinkDebounce, l.cfg.Debounce), MaxDelay: l.cfg.MaxDelay},
		hold: holdDown{Grace: l.cfg.RemovalGrace}, wake: time.NewTimer(0)}
}

// awaitNode waits until the Node is seen (cfg.Node); false if ctx ended first.
func (r *run) awaitNode(ctx context.Context) bool {
	v, ok := r.l.cfg.Node()
	if !ok {
		r.l.cfg.Logger.Info("waiting for the Node before the first resolution")
		r.l.awaiting.Store(true)
		defer r.l.awaiting.Store(false)
	}
	for !ok {
		select {
		case <-ctx.Done():
			return false
		case <-r.l.nodeKick:
			v, ok = r.l.cfg.Node()
		}
	}
	r.node = v
	r.hold.Seed(v.Addresses)
	r.l.lastTurn.Store(time.Now().UnixNano())
	return true
}

// event takes a kernel change signal whose burst began at first; link: it had a link event.
func (r *run) event(first time.Time, link bool) {
	if first.IsZero() {
		first = time.Now()
	}
	if r.since.IsZero() || first.Before(r.since) {
		r.since = first
	}
	r.deb.Event(time.Now(), link)
}

// nodeChanged reads the Node again: it resolves if the pod CIDRs changed, else reruns the Node's stages.
func (r *run) nodeChanged() {
	v, ok := r.l.cfg.Node()
	if !ok {
		return // deleted: keep the last view until it is back
	}
	cidrs := !slices.Equal(v.PodCIDRs, r.node.PodCIDRs)
	api := !slices.Equal(v.APIServer, r.node.APIServer)
	others := v.ProvidedNodeIP != r.node.ProvidedNodeIP || !slices.Equal(v.Unmanaged, r.node.Unmanaged)
	r.node = v
	switch {
	case cidrs:
		r.resolve("pod-cidrs-changed")
	case api:
		r.resolve("apiserver-addresses-changed")
	case others && r.kernel != nil:
		r.publish("node-changed", time.Time{})
	}
}

// due resolves if the debounce, the hold-down or the retry deadline has passed.
func (r *run) due(now time.Time) {
	if d, why, ok := r.deb.Due(); ok && !now.Before(d) {
		r.waited = why
		r.l.cfg.Logger.Debug("kernel changes settled", "since", r.since.Format(time.RFC3339Nano), "waited", r.waited)
		r.resolve("netlink")
		r.waited = ""
	} else if !r.holdUntil.IsZero() && !now.Before(r.holdUntil) {
		r.resolve("removal-grace-expired")
	} else if !r.retryAt.IsZero() && !now.Before(r.retryAt) {
		r.resolve("retry")
	}
}

// resolve runs the kernel's stages (selection, discovery, hold-down), then publish.
func (r *run) resolve(reason string) {
	l, log := r.l, r.l.cfg.Logger
	now := time.Now()
	r.deb.Reset()
	r.retryAt = time.Time{}
	// The reference for stickiness: the last kernel result, else the Node's addresses.
	prev := State{Managed: l.cfg.Policy.Managed, Addresses: r.node.Addresses}
	if r.kernel != nil {
		prev = *r.kernel
	}
	raw, skips, err := ResolvePolicy(l.cfg.Kernel, l.cfg.Policy.Excluding(r.node.PodCIDRs).WithAPIServer(r.node.APIServer), prev)
	if err != nil {
		l.cfg.Metrics.resolution(ResultError)
		log.Warn("resolution failed", "reason", reason, "err", err, "retry_in", l.cfg.RetryInterval)
		r.retryAt = now.Add(l.cfg.RetryInterval)
		// The retry applies the hold-down again. A hold-down deadline left in the past would
		// re-arm the timer at once and retry in a tight loop until netlink recovers.
		r.holdUntil = time.Time{}
		return
	}
	l.cfg.Metrics.resolution(ResultSuccess)
	logSkips(log, skips)
	if l.cfg.Discovery != nil {
		raw = WithDiscovery(l.cfg.Discovery, raw)
	}
	eff, next := r.hold.Apply(now, raw)
	r.holdUntil = next
	if !next.IsZero() {
		log.Info("address no longer resolves, holding it", "reason", reason,
			"state", eff.String(), "until", next.Format(time.RFC3339Nano))
	}
	r.kernel = &eff
	r.publish(reason, r.since)
	r.since = time.Time{}
	if rt, ok := l.cfg.Kernel.(RuleTables); ok && l.cfg.RouteTables != nil {
		if tables, err := rt.RuleTables(); err == nil {
			l.cfg.RouteTables.SetRouteTables(tables)
		}
	}
}

// publish runs the Node's stages on the last kernel result and hands the outcome to the sink.
func (r *run) publish(reason string, since time.Time) {
	l, log := r.l, r.l.cfg.Logger
	out := nodeStages(l.cfg.Policy, r.node, *r.kernel)
	if Changed(r.published, out) {
		old := "none"
		if r.published != nil {
			old = r.published.String()
		}
		attrs := []any{"reason", reason, "old", old, "new", out.String()}
		if r.waited != "" { // the debounce's wait behind a netlink resolution, and which hold set it
			attrs = append(attrs, "waited", r.waited)
		}
		log.Info("desired addresses changed", attrs...)
		logExplanation(log, out.Explanation)
	}
	r.published = &out
	l.sink.Publish(out, since)
}

// arm sets the wake timer to the earliest pending deadline.
func (r *run) arm() {
	due, _, _ := r.deb.Due() // zero when nothing is pending
	for _, t := range []time.Time{r.holdUntil, r.retryAt} {
		if !t.IsZero() && (due.IsZero() || t.Before(due)) {
			due = t
		}
	}
	if !r.wake.Stop() {
		select {
		case <-r.wake.C:
		default:
		}
	}
	if !due.IsZero() {
		r.wake.Reset(max(time.Until(due), 0))
	}
}

// logSkips logs, at debug level, why candidates and targets gave no address.
func logSkips(log *slog.Logger, skips []Skip) {
	for _, s := range skips {
		if !s.Target.IP.IsValid() || s.Target.placeholder() {
			log.Debug("candidate skipped", "type", s.Target.Type, "address", s.Source, "reason", s.Reason)
			continue
		}
		log.Debug("target not resolved", "type", s.Target.Type, "target", s.Target.IP,
			"source", s.Source, "reason", s.Reason)
	}
}
