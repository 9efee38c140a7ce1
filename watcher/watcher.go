// Package watcher turns kernel netlink notifications (addresses, routes, links) into a coalesced
// "something changed" signal. It never computes addresses: the resolver takes a fresh snapshot of
// kernel state whenever the signal fires.
package watcher

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vishvananda/netlink"
)

// Observer receives counts for metrics. Implementations must be cheap: OnEvent runs in the receive
// loop.
type Observer interface {
	OnNetlinkEvent(kind string)
	OnResubscribe(subscription string)
}

// Config configures a Watcher.
type Config struct {
	// ReceiveBufferSize is the requested socket receive buffer in bytes (capped by
	// net.core.rmem_max; forcing it would need CAP_NET_ADMIN, which the agent does not have). 0
	// keeps the kernel default.
	ReceiveBufferSize int
	// MinBackoff and MaxBackoff bound the delay between resubscription attempts.
	MinBackoff, MaxBackoff time.Duration
	Logger                 *slog.Logger
	Observer               Observer
}

// Watcher owns the three netlink subscriptions and raises Signal when a relevant message arrives or
// after a resubscription.
type Watcher struct {
	cfg    Config
	signal *Signal
	log    *slog.Logger
	obs    Observer
	// active counts the subscriptions currently delivering messages; healthy when all three are.
	active atomic.Int32
	routes routeFilter
	mu     sync.Mutex // guards routes.Tables, replaced by SetRouteTables
}

// New returns a watcher that raises sig.
func New(cfg Config, sig *Signal) *Watcher {
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = 100 * time.Millisecond
	}
	if cfg.MaxBackoff < cfg.MinBackoff {
		cfg.MaxBackoff = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	obs := cfg.Observer
	if obs == nil {
		obs = nopObserver{}
	}
	return &Watcher{cfg: cfg, signal: sig, log: cfg.Logger, obs: obs}
}

type nopObserver struct{}

func (nopObserver) OnNetlinkEvent(string) {}
func (nopObserver) OnResubscribe(string)  {}

const subscriptions = 3

// Healthy reports whether all subscriptions are established.
func (w *Watcher) Healthy() bool { return w.active.Load() == subscriptions }

// SetRouteTables sets the policy-routing tables (beyond main, local and default) whose route changes
// matter. The resolver refreshes it from the rule list on every full resolution.
func (w *Watcher) SetRouteTables(tables []int) {
	m := make(map[int]bool, len(tables))
	for _, t := range tables {
		m[t] = true
	}
	w.mu.Lock()
	w.routes.Tables = m
	w.mu.Unlock()
}

// Run subscribes and delivers signals until ctx is cancelled. It returns only then, after every
// subscription goroutine and socket is gone.
func (w *Watcher) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Add(subscriptions)
	go func() {
		defer wg.Done()
		var f addrFilter
		run(ctx, w, "address", func(ch chan netlink.AddrUpdate, done chan struct{}, cb func(error)) error {
			f.Reset()
			return netlink.AddrSubscribeWithOptions(ch, done, netlink.AddrSubscribeOptions{
				ErrorCallback: cb, ReceiveBufferSize: w.cfg.ReceiveBufferSize})
		}, func(u netlink.AddrUpdate) (string, bool) { return KindAddress, f.Ignore(u) })
	}()
	go func() {
		defer wg.Done()
		run(ctx, w, "route", func(ch chan netlink.RouteUpdate, done chan struct{}, cb func(error)) error {
			// No ListExisting: on a host with a large table the dump itself would overflow the
			// socket again. A resync needs only the address list and one RouteGet per target.
			return netlink.RouteSubscribeWithOptions(ch, done, netlink.RouteSubscribeOptions{
				ErrorCallback: cb, ReceiveBufferSize: w.cfg.ReceiveBufferSize})
		}, func(u netlink.RouteUpdate) (string, bool) {
			w.mu.Lock()
			ignore := w.routes.Ignore(u)
			w.mu.Unlock()
			return KindRoute, ignore
		})
	}()
	go func() {
		defer wg.Done()
		var f linkFilter
		run(ctx, w, "link", func(ch chan netlink.LinkUpdate, done chan struct{}, cb func(error)) error {
			f.Reset()
			return netlink.LinkSubscribeWithOptions(ch, done, netlink.LinkSubscribeOptions{
				ErrorCallback: cb, ReceiveBufferSize: w.cfg.ReceiveBufferSize})
		}, func(u netlink.LinkUpdate) (string, bool) { return KindLink, f.Ignore(u) })
	}()
	wg.Wait()
}

// run keeps one subscription alive. netlink v1.3.1 closes the update channel on any receive error
// (ENOBUFS when the kernel dropped messages) but keeps the socket open until done is closed; so each
// attempt gets a fresh done, the channel is drained until it closes, and a resubscription forces a
// resync because messages were lost.
func run[T any](ctx context.Context, w *Watcher, name string,
	subscribe func(ch chan T, done chan struct{}, cb func(error)) error,
	classify func(T) (kind string, ignore bool),
) {
	log := w.log.With("subscription", name)
	backoff := w.cfg.MinBackoff
	first := true
	for ctx.Err() == nil {
		ch := make(chan T, 256)
		done := make(chan struct{})
		var stopped atomic.Bool
		err := subscribe(ch, done, func(err error) {
			if !stopped.Load() {
				log.Warn("netlink subscription error", "err", err)
			}
		})
		if err != nil {
			close(done)
			log.Error("netlink subscribe failed", "err", err, "retry_in", backoff)
			if !sleep(ctx, backoff) {
				return
			}
			backoff = min(2*backoff, w.cfg.MaxBackoff)
			continue
		}
		w.active.Add(1)
		if !first {
			w.obs.OnResubscribe(name)
			log.Info("netlink resubscribed, forcing a resync", "reason", "resubscribed")
			w.signal.Raise(time.Now())
		}
		first = false
		healthySince := time.Now()
		closed := receive(ctx, ch, w, classify)
		w.active.Add(-1)
		stopped.Store(!closed)
		close(done)
		for range ch { // let the library goroutine finish its blocked send and exit
		}
		if !closed {
			return
		}
		// Reset the backoff after a subscription that lived for a while, so a single overflow a day
		// resubscribes at once while a tight loop of failures slows down.
		if time.Since(healthySince) > 10*w.cfg.MaxBackoff {
			backoff = w.cfg.MinBackoff
		}
		log.Warn("netlink subscription closed, resubscribing", "retry_in", backoff)
		if !sleep(ctx, backoff) {
			return
		}
		backoff = min(2*backoff, w.cfg.MaxBackoff)
	}
}

// receive is the hot loop: classify, count, raise. It returns true when the channel closed and false
// when ctx was cancelled.
func receive[T any](ctx context.Context, ch chan T, w *Watcher, classify func(T) (string, bool)) bool {
	for {
		select {
		case <-ctx.Done():
			return false
		case u, ok := <-ch:
			if !ok {
				return true
			}
			kind, ignore := classify(u)
			if ignore {
				continue
			}
			w.obs.OnNetlinkEvent(kind)
			w.signal.Raise(time.Now())
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
