package publisher

// The driver: a single-key work queue (queue.go) whose failed reconciles retry on a randomized
// schedule (retry.go). --run-once drives the same reconcile from the agent (Reconcile, RetryIn).

import (
	"context"
)

// processNext reconciles once per dequeued key; false once the queue shuts down.
func (p *Publisher) processNext(ctx context.Context) bool {
	if p.queue.Get() {
		return false
	}
	defer p.queue.Done()
	p.retry.Began()
	err := p.reconcile(ctx)
	if ctx.Err() != nil {
		return false
	}
	if err == nil {
		p.retry.Forget()
		return true
	}
	p.queue.AddAfter(p.RetryIn(err))
	return true
}

// Reconcile makes one reconcile pass now with the Node as the view has it and the state last
// published: the pass the worker runs for each queued request. --run-once calls it after it has
// read the Node and published its one resolution; a nil error means the Node is reconciled, and
// an error is retried after RetryIn.
func (p *Publisher) Reconcile(ctx context.Context) error {
	p.retry.Began()
	err := p.reconcile(ctx)
	if err == nil {
		p.retry.Forget()
	}
	return err
}
