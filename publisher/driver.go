package publisher

// The driver: a single-key work queue (queue.go) whose failed reconciles retry on a randomized
// schedule (retry.go), and --run-once, which reconciles with the same sync and the same retry
// policy.

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/nodeaddr/nodeaddr/resolver"
)

// processNext reconciles once per dequeued key; false once the queue shuts down.
func (p *Publisher) processNext(ctx context.Context) bool {
	if p.queue.Get() {
		return false
	}
	defer p.queue.Done()
	err := p.reconcile(ctx)
	if ctx.Err() != nil {
		return false
	}
	switch delay, limited := p.retryAfter(err); {
	case err == nil:
		p.retry.Forget()
	case limited:
		p.queue.AddAfter(p.retry.When())
	default:
		p.queue.AddAfter(delay)
	}
	return true
}

var errConflict = errors.New("conflict")

// holdError defers a rewrite of reverted addresses until the revert backoff allows it.
type holdError struct{ until time.Time }

func (h holdError) Error() string { return "rewrite held back until " + h.until.Format(time.RFC3339) }

// retryAfter is the retry policy of a failed reconcile: a held-back rewrite waits for its time, a
// conflict (this Node's own race, not a fleet-wide outage) retries soon, anything else backs off
// on the retry schedule (limited).
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

// RunOnce reads the Node, resolves with its view (pod CIDRs excluded, its addresses kept among
// equal candidates, as the long-running agent does), reconciles it and returns the state it
// reconciled to (--run-once, bounded by ctx: --timeout). It reads with GET instead of a watch, and
// retries with the long-running driver's sync and retry policy. A missing Node is waited for;
// authorization and resolution errors are returned at once.
func (p *Publisher) RunOnce(ctx context.Context, resolve func(resolver.NodeView) (resolver.State, error)) (resolver.State, error) {
	// The Node comes from each attempt's GET, not from an informer.
	p.nodes = newNodeCache(cache.NewStore(cache.MetaNamespaceKeyFunc), p.cfg.NodeName)
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
			delay = p.retry.When()
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
