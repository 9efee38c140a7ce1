package publisher

import (
	"sync"
	"time"
)

// queue is the driver's work queue for its one key, the Node: client-go's rate-limiting workqueue
// for a single item, without the delaying queue's 10 s heartbeat, which woke an idle agent 6 times
// a minute. Any request cancels a pending delayed one: every reconcile schedules its own follow-up.
type queue struct {
	mu         sync.Mutex
	wake       *sync.Cond
	dirty      bool // a reconcile is requested
	processing bool // Get returned and Done has not been called
	shutdown   bool
	timer      *time.Timer // pending delayed request, fires at due
	due        time.Time
}

func newQueue() *queue {
	q := &queue{}
	q.wake = sync.NewCond(&q.mu)
	return q
}

// Add requests a reconcile now.
func (q *queue) Add() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.addLocked()
}

func (q *queue) addLocked() {
	q.stopTimerLocked()
	if q.shutdown || q.dirty {
		return
	}
	q.dirty = true
	if !q.processing {
		q.wake.Signal()
	}
}

// AddAfter requests a reconcile in d, unless one is requested sooner already.
func (q *queue) AddAfter(d time.Duration) {
	if d <= 0 {
		q.Add()
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	at := time.Now().Add(d)
	if q.shutdown || q.dirty || q.timer != nil && !q.due.After(at) {
		return
	}
	q.stopTimerLocked()
	q.due = at
	var t *time.Timer
	t = time.AfterFunc(d, func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		if q.timer == t { // not stopped or replaced meanwhile
			q.addLocked()
		}
	})
	q.timer = t
}

func (q *queue) stopTimerLocked() {
	if q.timer != nil {
		q.timer.Stop()
		q.timer = nil
	}
}

// Get blocks until a reconcile is requested and none is running, and marks one running.
func (q *queue) Get() (quit bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for !q.shutdown && (!q.dirty || q.processing) {
		q.wake.Wait()
	}
	if q.shutdown {
		return true
	}
	q.dirty, q.processing = false, true
	return false
}

// Done ends the running reconcile; a request made meanwhile is handed to Get.
func (q *queue) Done() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.processing = false
	if q.dirty {
		q.wake.Signal()
	}
}

// Len is 1 while a reconcile is requested and not yet handed to Get, else 0.
func (q *queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.dirty {
		return 1
	}
	return 0
}

// ShutDown ends every Get, now and later, and drops a pending delayed request.
func (q *queue) ShutDown() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.shutdown = true
	q.stopTimerLocked()
	q.wake.Broadcast()
}
