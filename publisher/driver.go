package publisher

// The driver: a single-key work queue (queue.go) whose failed reconciles retry on retry.go's schedule.

import "context"

// processNext reconciles once per dequeued key; false once the queue shuts down.
func (p *Publisher) processNext(ctx context.Context) bool {
	if p.queue.Get() {
		return false
	}
	defer p.queue.Done()
	err := p.Reconcile(ctx)
	if ctx.Err() != nil {
		return false
	}
	if err != nil {
		p.queue.AddAfter(p.RetryIn(err))
	}
	return true
}

// Reconcile makes one reconcile pass now, the worker's pass (--run-once calls it too): a nil error
// means the Node is reconciled, and an error is retried after RetryIn.
func (p *Publisher) Reconcile(ctx context.Context) error {
	p.retry.Began()
	err := p.reconcile(ctx)
	if err == nil {
		p.retry.Forget()
	}
	return err
}
