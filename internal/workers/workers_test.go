package workers

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/util/workqueue"
)

// A key whose sync fails is retried through the rate limiter until it succeeds; every key is
// synced, and Run returns once ctx ends.
func TestRunRetriesFailedKeys(t *testing.T) {
	q := workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Millisecond, 10*time.Millisecond))
	var mu sync.Mutex
	calls := map[string]int{}
	done := make(chan struct{})
	syncKey := func(_ context.Context, key string) error {
		mu.Lock()
		defer mu.Unlock()
		calls[key]++
		if key == "b" && calls[key] < 3 {
			return errors.New("not yet")
		}
		if calls["a"] == 1 && calls["b"] == 3 {
			close(done)
		}
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	q.Add("a")
	q.Add("b")
	ran := make(chan struct{})
	go func() { Run(ctx, q, 2, syncKey, slog.New(slog.DiscardHandler), "not synced"); close(ran) }()
	<-done
	cancel()
	<-ran
	if calls["a"] != 1 || calls["b"] != 3 {
		t.Errorf("syncs %v, want a once, b three times (two failures, then success)", calls)
	}
	if q.NumRequeues("b") != 0 {
		t.Errorf("b's failures not forgotten after its success: %d requeues", q.NumRequeues("b"))
	}
	if !q.ShuttingDown() {
		t.Error("the queue is not shut down after Run returned")
	}
}
