package resolver

import (
	"context"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Trigger delivers coalesced "something changed" signals (the watcher's Signal).
type Trigger interface {
	C() <-chan struct{}
	// Take clears the pending signal and returns when its first event happened.
	Take() time.Time
}

// Sink receives every resolved state. It is called from the loop's goroutine and must not block.
type Sink interface {
	// Publish hands over the desired state; since is the time of the first kernel event behind it
	// (zero for periodic or initial resolutions).
	Publish(s State, since time.Time)
}

// Observer receives counts for metrics.
type Observer interface {
	OnResolution(result string)
	OnResync(at time.Time)
}

// LoopConfig configures Loop.
type LoopConfig struct {
	Kernel  Kernel
	Managed []AddressType
	Targets []Target
	// Policy is the selection policy; its Managed and Targets default to the fields above.
	Policy         Policy
	Debounce       time.Duration
	MaxDelay       time.Duration
	RemovalGrace   time.Duration
	ResyncInterval time.Duration
	// RetryInterval is how soon a failed resolution is tried again; default 1s.
	RetryInterval time.Duration
	// OnRouteTables, if set, is given the policy-routing tables after each resolution when the
	// kernel can list them.
	OnRouteTables func([]int)
	// AwaitNode holds the first resolution until SetNode: it then already excludes the Node's pod
	// CIDRs and keeps the Node's current addresses among equal candidates, so that a restarted
	// agent (a DaemonSet rollout) never flips an address the previous one chose.
	AwaitNode bool
	Logger    *slog.Logger
	Observer  Observer
}

// Loop resolves after each debounced burst of changes, after each hold-down expiry and every
// ResyncInterval, and hands the result to a Sink.
type Loop struct {
	cfg      LoopConfig
	trigger  Trigger
	sink     Sink
	lastTurn atomic.Int64 // unix nanos of the last loop iteration, for health
	kick     chan struct{}

	mu        sync.Mutex
	podCIDRs  []netip.Prefix
	nodeAddrs []Address     // the Node's managed addresses, the stickiness reference until we publish
	nodeSeen  bool          // SetNode was called
	nodeKnown chan struct{} // closed by the first SetNode
	awaiting  atomic.Bool   // Run waits for the first SetNode
}

// NodeView is what the resolver needs to know of the Node.
type NodeView struct {
	PodCIDRs  []netip.Prefix // excluded from selection
	Addresses []Address      // the Node's current addresses of the managed types
}

// NewLoop returns a loop reading changes from trigger and publishing to sink.
func NewLoop(cfg LoopConfig, trigger Trigger, sink Sink) *Loop {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.RetryInterval <= 0 {
		cfg.RetryInterval = time.Second
	}
	if cfg.Policy.Managed == nil {
		cfg.Policy.Managed = cfg.Managed
	}
	if cfg.Policy.Targets == nil {
		cfg.Policy.Targets = cfg.Targets
	}
	l := &Loop{cfg: cfg, trigger: trigger, sink: sink, kick: make(chan struct{}, 1), nodeKnown: make(chan struct{})}
	l.lastTurn.Store(time.Now().UnixNano())
	return l
}

// SetNode tells the loop about the Node: its pod CIDRs, excluded from selection (a change resolves
// again at once), and its current addresses, kept among equal candidates until the loop has
// published. The publisher, which watches the Node, calls it; it never blocks.
func (l *Loop) SetNode(v NodeView) {
	l.mu.Lock()
	changed := !slices.Equal(l.podCIDRs, v.PodCIDRs)
	first := !l.nodeSeen
	l.podCIDRs = slices.Clone(v.PodCIDRs)
	l.nodeAddrs = slices.Clone(v.Addresses)
	l.nodeSeen = true
	l.mu.Unlock()
	if first {
		close(l.nodeKnown)
		if l.cfg.AwaitNode {
			return // the first resolution is still to come
		}
	}
	if changed {
		select {
		case l.kick <- struct{}{}:
		default:
		}
	}
}

// policy returns the configured policy with the current pod CIDRs excluded.
func (l *Loop) policy() Policy {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cfg.Policy.Excluding(l.podCIDRs)
}

// LastTurn returns when the loop last woke up; now while it waits for the Node (AwaitNode), which
// is no stall: the publisher cannot write before it sees the Node either.
func (l *Loop) LastTurn() time.Time {
	if l.awaiting.Load() {
		return time.Now()
	}
	return time.Unix(0, l.lastTurn.Load())
}

// nodeState is the Node's current managed addresses as a State, for stickiness.
func (l *Loop) nodeState() State {
	l.mu.Lock()
	defer l.mu.Unlock()
	return State{Managed: l.cfg.Managed, Addresses: l.nodeAddrs}
}

// Run resolves once at start and then on every trigger until ctx ends.
func (l *Loop) Run(ctx context.Context) {
	log := l.cfg.Logger
	deb := Debouncer{Quiet: l.cfg.Debounce, MaxDelay: l.cfg.MaxDelay}
	hold := HoldDown{Grace: l.cfg.RemovalGrace}
	var (
		since     time.Time // first event of the pending burst
		published *State
		wake      = time.NewTimer(0) // fires for debounce, hold-down and retry deadlines
		holdUntil time.Time
		retryAt   time.Time
	)
	defer wake.Stop()
	var resync <-chan time.Time
	if l.cfg.ResyncInterval > 0 {
		t := time.NewTicker(l.cfg.ResyncInterval)
		defer t.Stop()
		resync = t.C
	}
	resolve := func(reason string) {
		now := time.Now()
		deb.Reset()
		retryAt = time.Time{}
		var prev State // the reference for stickiness: what we published, else the Node's addresses
		if published != nil {
			prev = *published
		} else {
			prev = l.nodeState()
		}
		raw, skips, err := ResolvePolicy(l.cfg.Kernel, l.policy(), prev)
		if err != nil {
			l.observe("error")
			log.Warn("resolution failed", "reason", reason, "err", err, "retry_in", l.cfg.RetryInterval)
			retryAt = now.Add(l.cfg.RetryInterval)
			// The retry applies the hold-down again. A hold-down deadline left in the past would
			// re-arm the timer at once and retry in a tight loop until netlink recovers.
			holdUntil = time.Time{}
			return
		}
		l.observe("success")
		for _, s := range skips {
			if !s.Target.IP.IsValid() {
				log.Debug("candidate skipped", "type", s.Target.Type, "address", s.Source, "reason", s.Reason)
				continue
			}
			log.Debug("target not resolved", "type", s.Target.Type, "target", s.Target.IP,
				"source", s.Source, "reason", s.Reason)
		}
		eff, next := hold.Apply(now, raw)
		holdUntil = next
		if !next.IsZero() {
			log.Info("address no longer resolves, holding it", "reason", reason,
				"state", eff.String(), "until", next.Format(time.RFC3339Nano))
		}
		if published == nil || !published.Equal(eff) {
			old := "none"
			if published != nil {
				old = published.String()
			}
			log.Info("desired addresses changed", "reason", reason, "old", old, "new", eff.String())
		}
		published = &eff
		l.sink.Publish(eff, since)
		since = time.Time{}
		if rt, ok := l.cfg.Kernel.(interface{ RouteTables() ([]int, error) }); ok && l.cfg.OnRouteTables != nil {
			if tables, err := rt.RouteTables(); err == nil {
				l.cfg.OnRouteTables(tables)
			}
		}
	}

	arm := func() {
		var due time.Time
		if d, ok := deb.Due(); ok {
			due = d
		}
		for _, t := range []time.Time{holdUntil, retryAt} {
			if !t.IsZero() && (due.IsZero() || t.Before(due)) {
				due = t
			}
		}
		if !wake.Stop() {
			select {
			case <-wake.C:
			default:
			}
		}
		if !due.IsZero() {
			wake.Reset(max(time.Until(due), 0))
		}
	}

	if l.cfg.AwaitNode {
		log.Info("waiting for the Node before the first resolution")
		l.awaiting.Store(true)
		select {
		case <-ctx.Done():
			return
		case <-l.nodeKnown:
		}
		l.lastTurn.Store(time.Now().UnixNano())
		l.awaiting.Store(false)
	}
	resolve("start")
	for {
		arm()
		select {
		case <-ctx.Done():
			return
		case <-l.trigger.C():
			first := l.trigger.Take()
			if first.IsZero() {
				first = time.Now()
			}
			if since.IsZero() || first.Before(since) {
				since = first
			}
			deb.Event(time.Now())
		case <-l.kick:
			resolve("pod-cidrs-changed")
		case now := <-resync:
			if o := l.cfg.Observer; o != nil {
				o.OnResync(now)
			}
			resolve("resync")
		case <-wake.C:
			now := time.Now()
			if d, ok := deb.Due(); ok && !now.Before(d) {
				resolve("netlink")
			} else if !holdUntil.IsZero() && !now.Before(holdUntil) {
				resolve("removal-grace-expired")
			} else if !retryAt.IsZero() && !now.Before(retryAt) {
				resolve("retry")
			}
		}
		l.lastTurn.Store(time.Now().UnixNano())
	}
}

func (l *Loop) observe(result string) {
	if o := l.cfg.Observer; o != nil {
		o.OnResolution(result)
	}
}
