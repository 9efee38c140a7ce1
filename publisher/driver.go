package publisher

// The driver: a single-key workqueue whose rate limiter is a stratified exponential backoff, and
// --run-once, which reconciles with the same sync and the same retry policy.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"

	"github.com/nodeaddr/nodeaddr/resolver"
)

// processNext reconciles once per dequeued key; false once the queue shuts down.
func (p *Publisher) processNext(ctx context.Context) bool {
	key, quit := p.queue.Get()
	if quit {
		return false
	}
	defer p.queue.Done(key)
	err := p.reconcile(ctx)
	if ctx.Err() != nil {
		return false
	}
	switch delay, limited := p.retryAfter(err); {
	case err == nil:
		p.queue.Forget(key)
	case limited:
		p.queue.AddRateLimited(key)
	default:
		p.queue.AddAfter(key, delay)
	}
	return true
}

var errConflict = errors.New("conflict")

// holdError defers a rewrite of reverted addresses until the revert backoff allows it.
type holdError struct{ until time.Time }

func (h holdError) Error() string { return "rewrite held back until " + h.until.Format(time.RFC3339) }

// retryAfter is the retry policy of a failed reconcile: a held-back rewrite waits for its time, a
// conflict (this Node's own race, not a fleet-wide outage) retries soon, anything else backs off
// through the rate limiter (limited).
func (p *Publisher) retryAfter(err error) (delay time.Duration, limited bool) {
	var hold holdError
	switch {
	case err == nil:
		return 0, false
	case errors.As(err, &hold):
		return max(time.Until(hold.until), time.Millisecond), false
	case errors.Is(err, errConflict):
		return max(p.cfg.MinBackoff/4, time.Millisecond), false
	default:
		return 0, true
	}
}

// jitteredBackoff is the workqueue rate limiter of failed reconciles: exponential from min,
// doubling up to max, stratified. Counted from an item's first failure (since the last Forget),
// the time is cut into consecutive windows whose widths are wait.Backoff's steps (min, 2·min,
// 4·min … up to max): [min, 2·min), [2·min, 4·min) …; attempt k falls at a uniformly random point of
// window k, drawn afresh, whatever the earlier draws were.
//
// Why windows and not jitter on each delay: per-delay jitter (wait.Backoff's Jitter) sums the
// jitter of all earlier delays, so after an outage of a fleet that lost the API server at the same
// moment, the first attempts after recovery form a bell whose middle carries the peak. Here the
// attempts of a window are uniform over it. client-go's ItemExponentialFailureRateLimiter has no
// randomness at all.
type jitteredBackoff struct {
	min, max time.Duration
	rand     func() float64   // uniform in [0, 1); a seeded source in tests
	now      func() time.Time // time.Now; a fake clock in tests
	mu       sync.Mutex
	items    map[string]*retryWindows
}

// retryWindows is one item's schedule: the windows' widths, and where the next one starts.
type retryWindows struct {
	first  time.Time
	widths wait.Backoff
	next   time.Duration // since first
	count  int
}

func newJitteredBackoff(min, max time.Duration) *jitteredBackoff {
	return &jitteredBackoff{min: min, max: max, rand: rand.Float64, now: time.Now, items: map[string]*retryWindows{}}
}

// When returns the next delay for item: to a random point of the next window that has not passed.
func (b *jitteredBackoff) When(item string) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	w, ok := b.items[item]
	if !ok {
		w = &retryWindows{first: now, next: b.min,
			widths: wait.Backoff{Duration: b.min, Factor: 2, Steps: math.MaxInt32, Cap: b.max}}
		b.items[item] = w
	}
	w.count++
	elapsed := now.Sub(w.first)
	for {
		lo, width := w.next, w.widths.Step()
		w.next += width
		if w.next <= elapsed {
			continue // the attempt took longer than this window: it is over
		}
		lo = max(lo, elapsed)
		return lo - elapsed + time.Duration(b.rand()*float64(w.next-lo))
	}
}

// Forget starts item's backoff over.
func (b *jitteredBackoff) Forget(item string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.items, item)
}

// NumRequeues is how many delays were handed out since the last Forget.
func (b *jitteredBackoff) NumRequeues(item string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if w, ok := b.items[item]; ok {
		return w.count
	}
	return 0
}

// RunOnce reads the Node, resolves with its view (pod CIDRs excluded, its addresses kept among
// equal candidates, as the long-running agent does), reconciles it and returns the state it
// reconciled to (--run-once, bounded by ctx: --timeout). It reads with GET instead of a watch, and
// retries with the long-running driver's sync and retry policy. A missing Node is waited for;
// authorization and resolution errors are returned at once.
func (p *Publisher) RunOnce(ctx context.Context, resolve func(resolver.NodeView) (resolver.State, error)) (resolver.State, error) {
	// The Node comes from each attempt's GET, not from an informer.
	p.nodes = newNodeCache(cache.NewStore(cache.MetaNamespaceKeyFunc), p.cfg.NodeName)
	defer p.queue.ShutDown() // unused here, but New started its delaying goroutine
	for {
		st, err := p.once(ctx, resolve)
		if err == nil {
			return st, nil
		}
		var rerr resolveError
		if errors.As(err, &rerr) || apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
			return resolver.State{}, err
		}
		delay, limited := p.retryAfter(err)
		if limited {
			delay = p.retry.When(p.cfg.NodeName)
		}
		if ctx.Err() != nil {
			return resolver.State{}, fmt.Errorf("%w (gave up: %w)", err, context.Cause(ctx))
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return resolver.State{}, fmt.Errorf("%w (gave up: %w)", err, context.Cause(ctx))
		case <-t.C:
		}
	}
}

type resolveError struct{ error }

func (e resolveError) Unwrap() error { return e.error }

// once makes one attempt of RunOnce.
func (p *Publisher) once(ctx context.Context, resolve func(resolver.NodeView) (resolver.State, error)) (resolver.State, error) {
	n, err := p.cfg.Nodes.Get(ctx, p.cfg.NodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return resolver.State{}, fmt.Errorf("node %q not found: %w", p.cfg.NodeName, err)
	}
	if err != nil {
		return resolver.State{}, fmt.Errorf("read node %q: %w", p.cfg.NodeName, err)
	}
	trimNode(n)
	if err := p.nodes.store.Replace([]any{n}, n.ResourceVersion); err != nil {
		return resolver.State{}, err
	}
	st, err := resolve(NodeView(n, p.cfg.Managed))
	if err != nil {
		return resolver.State{}, resolveError{err}
	}
	p.Publish(st, time.Time{})
	return st, p.reconcile(ctx)
}

// NodeView is what the resolver takes from n: its pod CIDRs and its addresses of the managed types.
func NodeView(n *corev1.Node, managed []resolver.AddressType) resolver.NodeView {
	return resolver.NodeView{PodCIDRs: podCIDRs(n), Addresses: inStatusOrder(n.Status.Addresses, managed, nil)}
}
