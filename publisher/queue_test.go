package publisher

import (
	"testing"
	"time"
)

// get runs q.Get in the background; the channel yields its quit result.
func get(q *queue) <-chan bool {
	c := make(chan bool, 1)
	go func() { c <- q.Get() }()
	return c
}

func mustReturn(t *testing.T, c <-chan bool, what string) bool {
	t.Helper()
	select {
	case quit := <-c:
		return quit
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: Get did not return", what)
		return false
	}
}

func mustBlock(t *testing.T, c <-chan bool, what string) {
	t.Helper()
	select {
	case <-c:
		t.Fatalf("%s: Get returned", what)
	case <-time.After(50 * time.Millisecond):
	}
}

// Requests coalesce: two before a Get are one reconcile, one made while a reconcile runs is one
// more run after Done, not a concurrent one.
func TestQueueCoalesces(t *testing.T) {
	q := newQueue()
	t.Cleanup(q.ShutDown)
	q.Add()
	q.Add()
	if q.Len() != 1 {
		t.Fatalf("Len after two Adds = %d, want 1", q.Len())
	}
	if mustReturn(t, get(q), "first") {
		t.Fatal("quit before shutdown")
	}
	q.Add() // while processing
	second := get(q)
	mustBlock(t, second, "a reconcile is running")
	q.Done()
	if mustReturn(t, second, "after Done") {
		t.Fatal("quit before shutdown")
	}
	q.Done()
	if q.Len() != 0 {
		t.Errorf("Len after both runs = %d, want 0", q.Len())
	}
}

// A delayed request keeps the earliest time asked for; a request now cancels it, and nothing is
// left armed when the queue is idle (no heartbeat wakes an idle agent).
func TestQueueDelays(t *testing.T) {
	q := newQueue()
	t.Cleanup(q.ShutDown)
	q.AddAfter(time.Hour)
	q.AddAfter(20 * time.Millisecond)
	q.AddAfter(time.Hour) // later: ignored
	mustReturn(t, get(q), "the 20 ms request")
	q.Done()
	if q.timer != nil {
		t.Error("a timer is still armed after the delayed request fired")
	}

	q.AddAfter(time.Hour)
	q.Add()
	if q.timer != nil {
		t.Error("Add left the delayed request armed")
	}
	mustReturn(t, get(q), "Add")
	q.Done()
	if q.Len() != 0 || q.timer != nil {
		t.Errorf("idle queue: Len %d, timer armed %v; want 0, false", q.Len(), q.timer != nil)
	}
}

// ShutDown ends a blocked Get and every later one, and drops a delayed request.
func TestQueueShutDown(t *testing.T) {
	q := newQueue()
	q.AddAfter(time.Hour)
	blocked := get(q)
	mustBlock(t, blocked, "nothing requested")
	q.ShutDown()
	if !mustReturn(t, blocked, "shutdown") {
		t.Error("blocked Get did not quit")
	}
	if !q.Get() {
		t.Error("Get after ShutDown did not quit")
	}
	if q.timer != nil {
		t.Error("ShutDown left the delayed request armed")
	}
}
