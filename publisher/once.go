package publisher

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeaddr/nodeaddr/resolver"
)

// ReconcileOnce reads the Node, resolves with its view (pod CIDRs excluded, its addresses kept
// among equal candidates, as the long-running agent does), writes the result and removes the
// taint, retrying conflicts and transient errors until ctx ends (--run-once, bounded by --timeout).
// A missing Node is waited for. It returns the state written, or an error that says what could not
// be done; authorization and resolution errors are returned at once.
func (p *Publisher) ReconcileOnce(ctx context.Context, resolve func(resolver.NodeView) (resolver.State, error)) (resolver.State, error) {
	backoff := retryBackoff(p.cfg.MinBackoff, p.cfg.MaxBackoff)
	var last error
	for {
		n, err := p.cfg.Nodes.Get(ctx, p.cfg.NodeName, metav1.GetOptions{})
		switch {
		case err == nil:
			trimNode(n)
			st, rerr := resolve(p.nodeView(n))
			if rerr != nil {
				return resolver.State{}, rerr
			}
			p.Publish(st, time.Time{})
			p.mu.Lock()
			p.node = n
			p.mu.Unlock()
			err = p.reconcile(ctx)
			if err == nil {
				return st, nil
			}
			if errors.Is(err, errConflict) {
				continue
			}
			last = err
		case apierrors.IsNotFound(err):
			last = fmt.Errorf("node %q not found", p.cfg.NodeName)
		default:
			last = err
		}
		if apierrors.IsForbidden(last) || apierrors.IsUnauthorized(last) {
			return resolver.State{}, last
		}
		if ctx.Err() != nil {
			return resolver.State{}, fmt.Errorf("%w (gave up: %w)", last, context.Cause(ctx))
		}
		t := time.NewTimer(backoff.Step())
		select {
		case <-ctx.Done():
			t.Stop()
			return resolver.State{}, fmt.Errorf("%w (gave up: %w)", last, context.Cause(ctx))
		case <-t.C:
		}
	}
}
