package resolver

import (
	"context"
	"log/slog"
	"net/netip"
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

// NodeInput is what a resolution takes from the Node (publisher.ResolverInput reads it).
type NodeInput struct {
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

// node returns the Node's view, ok false if it has not been seen (always true without cfg.Node).
func (l *Loop) node() (NodeInput, bool) {
	if l.cfg.Node == nil {
		return NodeInput{}, true
	}
	return l.cfg.Node()
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

func (l *Loop) observe(result string) { l.cfg.Metrics.resolution(result) }
