package publisher

// The driver: a single-key work queue (queue.go) whose failed reconciles retry on retry.go's schedule.

import "context"

// Run reconciles until ctx ends, once the informer behind cfg.Node has synced with NodeEvents: one
// worker reconciles once per dequeued key and schedules the retry of a failed pass.
func (p *Publisher) Run(ctx context.Context) error {
	go func() {
		<-ctx.Done()
		p.queue.ShutDown()
	}()
	if p.nodes.get() == nil {
		p.log.Warn("node not found, waiting for it to be created")
	}
	p.queue.Add()
	for !p.queue.Get() {
		err := p.Reconcile(ctx)
		if err != nil && ctx.Err() == nil {
			p.queue.AddAfter(p.RetryIn(err))
		}
		p.queue.Done()
		if ctx.Err() != nil {
			break
		}
	}
	return nil
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
