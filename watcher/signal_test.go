package watcher

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// pending reports whether a signal can be received from s.C() right now, and consumes it.
func pending(s *Signal) bool {
	select {
	case <-s.C():
		return true
	default:
		return false
	}
}

func TestSignalEmpty(t *testing.T) {
	s := NewSignal()
	if pending(s) {
		t.Error("a new signal is pending")
	}
	if got := s.Take(); !got.IsZero() {
		t.Errorf("Take on a new signal = %v, want zero", got)
	}
}

func TestSignalCoalesces(t *testing.T) {
	s := NewSignal()
	for i := range 100 {
		s.Raise(t0.Add(time.Duration(i) * time.Millisecond))
	}
	if !pending(s) {
		t.Fatal("no signal pending after 100 raises")
	}
	if pending(s) {
		t.Fatal("100 raises left more than one signal pending")
	}
	if got := s.Take(); !got.Equal(t0) {
		t.Errorf("Take = %v, want the first raise %v", got, t0)
	}
	if got := s.Take(); !got.IsZero() {
		t.Errorf("second Take = %v, want zero", got)
	}

	// A new burst after Take has its own first time.
	s.Raise(t0.Add(time.Hour))
	s.Raise(t0.Add(2 * time.Hour))
	if !pending(s) {
		t.Fatal("no signal pending after a new burst")
	}
	if got, want := s.Take(), t0.Add(time.Hour); !got.Equal(want) {
		t.Errorf("Take after a new burst = %v, want %v", got, want)
	}
}

func TestSignalRaiseBetweenReceiveAndTake(t *testing.T) {
	s := NewSignal()
	s.Raise(t0)
	if !pending(s) {
		t.Fatal("no signal pending")
	}
	// The consumer received but has not taken yet: the raise belongs to the burst being taken,
	// and leaves a signal pending so it is not lost.
	s.Raise(t0.Add(time.Second))
	if got := s.Take(); !got.Equal(t0) {
		t.Errorf("Take = %v, want %v", got, t0)
	}
	if !pending(s) {
		t.Fatal("the raise between receive and Take left no signal pending")
	}
	if got := s.Take(); !got.IsZero() {
		t.Errorf("Take for the coalesced raise = %v, want zero (its time went to the previous burst)", got)
	}
}

func TestSignalRaiseNeverBlocks(t *testing.T) {
	// In a bubble, a Raise that blocked with nobody receiving would be reported as a deadlock
	// instead of hanging the test.
	synctest.Test(t, func(t *testing.T) {
		s := NewSignal()
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for range 1000 {
					s.Raise(time.Now())
				}
			})
		}
		wg.Wait()
		if !pending(s) || pending(s) {
			t.Fatal("want exactly one pending signal after concurrent raises")
		}
		if got := s.Take(); !got.Equal(time.Now()) {
			t.Errorf("Take = %v, want %v", got, time.Now())
		}
	})
}

// A link event is remembered until TakeLink, beside the burst's first event.
func TestSignalLink(t *testing.T) {
	s := NewSignal()
	s.Raise(t0)
	s.RaiseLink(t0.Add(time.Second))
	s.RaiseLink(t0.Add(2 * time.Second))
	<-s.C()
	if first, link := s.Take(), s.TakeLink(); !first.Equal(t0) || !link.Equal(t0.Add(2*time.Second)) {
		t.Fatalf("Take, TakeLink = %v, %v", first, link)
	}
	s.Raise(t0.Add(3 * time.Second))
	<-s.C()
	if first, link := s.Take(), s.TakeLink(); !first.Equal(t0.Add(3*time.Second)) || !link.IsZero() {
		t.Fatalf("a burst without link events: Take, TakeLink = %v, %v", first, link)
	}
}
