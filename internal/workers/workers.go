// Package workers runs a cluster-side controller's workers over its work queue, as
// sample-controller does: each key is synced by one worker at a time; a failed sync is logged and
// retried through the queue's rate limiter, a successful one forgets the key's failures.
package workers

import (
	"context"
	"log/slog"
	"sync"

	"k8s.io/client-go/util/workqueue"
)

// Run runs n workers that take keys from q and sync them until ctx ends, then shuts q down and
// waits for them. A sync that fails while ctx is live is logged as failed (what went undone, with
// the key as node) and the key requeued rate-limited.
func Run(ctx context.Context, q workqueue.TypedRateLimitingInterface[string], n int,
	syncKey func(context.Context, string) error, log *slog.Logger, failed string) {
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for next(ctx, q, syncKey, log, failed) {
			}
		})
	}
	<-ctx.Done()
	q.ShutDown()
	wg.Wait()
}

// next syncs one key; false once the queue is shut down.
func next(ctx context.Context, q workqueue.TypedRateLimitingInterface[string],
	syncKey func(context.Context, string) error, log *slog.Logger, failed string) bool {
	key, shutdown := q.Get()
	if shutdown {
		return false
	}
	defer q.Done(key)
	if err := syncKey(ctx, key); err != nil && ctx.Err() == nil {
		log.Warn(failed, "node", key, "err", err)
		q.AddRateLimited(key)
	} else {
		q.Forget(key)
	}
	return true
}
