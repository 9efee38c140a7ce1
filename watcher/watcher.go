// Package watcher turns kernel netlink notifications (addresses, routes, links, rules) into a
// coalesced "something changed" signal; the resolver then takes a fresh snapshot of kernel state.
package watcher

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vishvananda/netlink"
)

// Config configures a Watcher.
type Config struct {
	// ReceiveBufferSize is the requested socket receive buffer in bytes (capped by
	// net.core.rmem_max: forcing it needs CAP_NET_ADMIN); 0 keeps the kernel default.
	ReceiveBufferSize int
	// MinBackoff and MaxBackoff bound the delay between resubscription attempts.
	MinBackoff, MaxBackoff time.Duration
	Logger                 *slog.Logger
	// Metrics, if set, counts events and resubscriptions (NewMetrics).
	Metrics *Metrics
}

// Watcher owns the four netlink subscriptions and raises Signal on relevant messages and resubscriptions.
type Watcher struct {
	cfg    Config
	signal *Signal
	log    *slog.Logger
	subs   subscriber
	// active counts the subscriptions currently delivering messages; healthy when all are.
	active atomic.Int32
	routes routeFilter
	mu     sync.Mutex // guards routes.Tables, replaced by SetRouteTables, extended by rule events
}

// New returns a watcher that raises sig.
func New(cfg Config, sig *Signal) *Watcher {
	return newWatcher(cfg, sig, netlinkSubscriber{rcvbuf: cfg.ReceiveBufferSize})
}

// newWatcher is New with the subscriptions opened through subs (a fake in unit tests).
func newWatcher(cfg Config, sig *Signal, subs subscriber) *Watcher {
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = 100 * time.Millisecond
	}
	if cfg.MaxBackoff < cfg.MinBackoff {
		cfg.MaxBackoff = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Watcher{cfg: cfg, signal: sig, log: cfg.Logger, subs: subs}
}

// Healthy reports whether all subscriptions, one per kind, are established.
func (w *Watcher) Healthy() bool { return int(w.active.Load()) == len(Kinds()) }

// SetRouteTables sets the policy-routing tables (beyond main, local and default) whose route changes
// matter, from the rule list after every resolution; between two, a rule event adds the table it
// points at (learnTable), so a route added right after its rule is not dropped.
func (w *Watcher) SetRouteTables(tables []int) {
	m := make(map[int]bool, len(tables))
	for _, t := range tables {
		m[t] = true
	}
	w.mu.Lock()
	w.routes.Tables = m
	w.mu.Unlock()
}

// learnTable adds table to the route filter's tables until the next SetRouteTables.
func (w *Watcher) learnTable(table int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.routes.Tables == nil {
		w.routes.Tables = map[int]bool{}
	}
	w.routes.Tables[table] = true
}

// Run subscribes and delivers signals until ctx is cancelled and every subscription is gone.
func (w *Watcher) Run(ctx context.Context) {
	var wg sync.WaitGroup
	var addrs addrFilter
	var links linkFilter
	wg.Go(func() { run(ctx, w, KindAddress, w.subs.Addr, addrs.Ignore, addrs.Reset) })
	wg.Go(func() {
		run(ctx, w, KindRoute, w.subs.Route, func(u netlink.RouteUpdate) bool {
			w.mu.Lock()
			defer w.mu.Unlock()
			return w.routes.Ignore(u)
		}, nil)
	})
	wg.Go(func() { run(ctx, w, KindLink, w.subs.Link, links.Ignore, links.Reset) })
	wg.Go(func() {
		run(ctx, w, KindRule, w.subs.Rule, func(u ruleUpdate) bool {
			if (ruleFilter{}).Ignore(u) {
				return true
			}
			if t, ok := (ruleFilter{}).lookupTable(u); ok {
				w.learnTable(t)
			}
			return false
		}, nil)
	})
	wg.Wait()
}

// run keeps one subscription alive. netlink v1.3.1 closes the update channel on any receive error
// (ENOBUFS) but keeps the socket open until done is closed; so each attempt gets a fresh done, the
// channel is drained until it closes, and a resubscription forces a resync (messages were lost).
// reset, if not nil, makes ignore forget what it has seen, before each attempt.
func run[T any](ctx context.Context, w *Watcher, kind string,
	subscribe func(ch chan T, done chan struct{}, cb func(error)) error,
	ignore func(T) bool, reset func(),
) {
	log := w.log.With("subscription", kind)
	backoff := w.cfg.MinBackoff
	first := true
	for ctx.Err() == nil {
		ch := make(chan T, 256)
		done := make(chan struct{})
		var stopped atomic.Bool
		if reset != nil {
			reset()
		}
		err := subscribe(ch, done, func(err error) {
			if !stopped.Load() {
				log.Warn("netlink subscription error", "err", err)
			}
		})
		if err != nil {
			close(done)
			log.Error("netlink subscribe failed", "err", err, "retry_in", backoff)
		} else {
			w.active.Add(1)
			if !first {
				w.cfg.Metrics.resubscribed(kind)
				log.Info("netlink resubscribed, forcing a resync", "reason", "resubscribed")
				w.signal.Raise(time.Now())
			}
			first = false
			healthySince := time.Now()
			closed := receive(ctx, ch, w, kind, ignore)
			w.active.Add(-1)
			stopped.Store(!closed)
			close(done)
			for range ch { // let the library goroutine finish its blocked send and exit
			}
			if !closed {
				return
			}
			// Reset the backoff after a subscription that lived for a while, so a single overflow a
			// day resubscribes at once while a tight loop of failures slows down.
			if time.Since(healthySince) > 10*w.cfg.MaxBackoff {
				backoff = w.cfg.MinBackoff
			}
			log.Warn("netlink subscription closed, resubscribing", "retry_in", backoff)
		}
		if !sleep(ctx, backoff) {
			return
		}
		backoff = min(2*backoff, w.cfg.MaxBackoff)
	}
}

// receive is the hot loop: classify, count, raise. It returns false when ctx was cancelled.
func receive[T any](ctx context.Context, ch chan T, w *Watcher, kind string, ignore func(T) bool) bool {
	raise := w.signal.Raise
	if kind == KindLink {
		raise = w.signal.RaiseLink
	}
	for {
		select {
		case <-ctx.Done():
			return false
		case u, ok := <-ch:
			if !ok {
				return true
			}
			if ignore(u) {
				continue
			}
			w.cfg.Metrics.netlinkEvent(kind)
			raise(time.Now())
		}
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Signal is a one-slot "something changed" notification: raising it never blocks, bursts coalesce,
// and Take says when the burst's first event happened (for the reaction-latency metric).
type Signal struct {
	ch          chan struct{}
	mu          sync.Mutex
	first, link time.Time
}

// NewSignal returns an empty signal.
func NewSignal() *Signal { return &Signal{ch: make(chan struct{}, 1)} }

// Raise records that something changed at now (the first since the last Take keeps its time).
func (s *Signal) Raise(now time.Time) {
	s.mu.Lock()
	if s.first.IsZero() {
		s.first = now
	}
	s.mu.Unlock()
	select {
	case s.ch <- struct{}{}:
	default:
	}
}

// RaiseLink is Raise for a link event: the resolver holds a burst with one longer (a carrier hold).
func (s *Signal) RaiseLink(now time.Time) {
	s.mu.Lock()
	s.link = now
	s.mu.Unlock()
	s.Raise(now)
}

// TakeLink clears and returns the time of the latest link event (zero if none).
func (s *Signal) TakeLink() time.Time { return s.take(&s.link) }

// C is ready when a signal is pending; call Take after receiving from it.
func (s *Signal) C() <-chan struct{} { return s.ch }

// Take clears the pending burst and returns the time of its first event (zero if none was recorded).
func (s *Signal) Take() time.Time { return s.take(&s.first) }

func (s *Signal) take(t *time.Time) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := *t
	*t = time.Time{}
	return v
}
