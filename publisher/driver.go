package publisher

// The driver: a single-key workqueue whose rate limiter is a randomized exponential backoff, and
// --run-once, which reconciles with the same sync and the same retry policy.
//
// Known cost: client-go's delaying queue ticks a 10 s heartbeat (workqueue maxWait) for as long as
// it runs, so the idle agent wakes about 6 times a minute more than with the hand-written timer
// loop this replaced (docs/BENCHMARKS.md, footprint: 8.0 wake events/min against 4.2). A queue
// equivalent without the heartbeat would win them back.

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

// scaledBackoff is the workqueue rate limiter of failed reconciles: exponential from min,
// doubling up to max, with an item's whole schedule scaled by one random factor u in [1, 2), drawn
// log-uniformly when its backoff starts (after Forget): its delays are u·min, 2u·min, 4u·min … up
// to max (wait.Backoff without Jitter), so its attempts fall on a geometric grid whose phase,
// log2 u, is uniform.
//
// Why one factor and not jitter on each delay (wait.Backoff's Jitter, used before): when an outage
// that every agent of a fleet saw begin at the same moment ends at any time R, each agent's first
// attempt is the next point of its own grid after R, so the fleet's first attempts spread over the
// next delay (about [R, 2R), at most max) with a density that varies by at most a factor of 2,
// whatever R is. Per-delay jitter sums into a bell: when the server comes back just before it the
// fleet writes within 30 s, when it comes back inside it the agents that had just failed wait a
// whole capped delay more (docs/BENCHMARKS.md, outage recovery: peak/mean 2.4-2.9 after a 60 s
// outage, 7.0-8.1 after 70 s; this schedule 2.3-3.1 and 2.6-2.8). The price: at the cap there is
// no randomness left, so agents that fail at the same moment there retry together. client-go's
// ItemExponentialFailureRateLimiter has no randomness at all.
type scaledBackoff struct {
	min, max time.Duration
	rand     func() float64 // uniform in [0, 1); a seeded source in tests
	mu       sync.Mutex
	items    map[string]*wait.Backoff
	counts   map[string]int
}

func newScaledBackoff(min, max time.Duration) *scaledBackoff {
	return &scaledBackoff{min: min, max: max, rand: rand.Float64, items: map[string]*wait.Backoff{}, counts: map[string]int{}}
}

// When returns the next delay for item.
func (b *scaledBackoff) When(item string) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	bo, ok := b.items[item]
	if !ok {
		scale := math.Exp2(b.rand())
		first := min(time.Duration(float64(b.min)*scale), b.max)
		bo = &wait.Backoff{Duration: first, Factor: 2, Steps: math.MaxInt32, Cap: b.max}
		b.items[item] = bo
	}
	b.counts[item]++
	return bo.Step()
}

// Forget starts item's backoff over.
func (b *scaledBackoff) Forget(item string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.items, item)
	delete(b.counts, item)
}

// NumRequeues is how many delays were handed out since the last Forget.
func (b *scaledBackoff) NumRequeues(item string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.counts[item]
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
