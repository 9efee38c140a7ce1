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

// ReconcileOnce writes s to the Node and removes the taint, retrying conflicts and transient errors
// until ctx ends (--run-once, bounded by --timeout). A missing Node is waited for. It returns an
// error that says what could not be done; authorization errors are returned at once.
func (p *Publisher) ReconcileOnce(ctx context.Context, s resolver.State) error {
	p.Publish(s, time.Time{})
	backoff := p.cfg.MinBackoff
	var last error
	for {
		n, err := p.cfg.Nodes.Get(ctx, p.cfg.NodeName, metav1.GetOptions{})
		switch {
		case err == nil:
			trimNode(n)
			p.mu.Lock()
			p.node = n
			p.mu.Unlock()
			err = p.reconcile(ctx)
			if err == nil {
				return nil
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
			return last
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%w (gave up: %w)", last, context.Cause(ctx))
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (gave up: %w)", last, context.Cause(ctx))
		case <-t.C:
		}
		backoff = min(2*backoff, p.cfg.MaxBackoff)
	}
}
