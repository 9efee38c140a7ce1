package watcher

import (
	"sync"
	"time"
)

// Signal is a one-slot "something changed" notification. Raising it never blocks: bursts of kernel
// events coalesce into one pending signal, and the consumer learns when the first event of the burst
// happened (for the reaction-latency metric) when it takes the signal.
type Signal struct {
	ch          chan struct{}
	mu          sync.Mutex
	first, link time.Time
}

// NewSignal returns an empty signal.
func NewSignal() *Signal { return &Signal{ch: make(chan struct{}, 1)} }

// Raise records that something changed at now. Only the first Raise since the last Take keeps its
// time. It is safe to call from any goroutine and costs a mutex and a non-blocking send.
func (s *Signal) Raise(now time.Time) {
	s.mu.Lock()
	if s.first.IsZero() {
		s.first = now
	}
	s.mu.Unlock()
	select {
	case s.ch <- struct{}{}:
	default:
	}
}

// RaiseLink is Raise for a link event: the resolver holds a burst with one longer (a carrier hold).
func (s *Signal) RaiseLink(now time.Time) {
	s.mu.Lock()
	s.link = now
	s.mu.Unlock()
	s.Raise(now)
}

// TakeLink clears and returns the time of the latest link event since the last TakeLink (zero if
// none).
func (s *Signal) TakeLink() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.link
	s.link = time.Time{}
	return t
}

// C is ready when a signal is pending; call Take after receiving from it.
func (s *Signal) C() <-chan struct{} { return s.ch }

// Take clears the pending burst and returns the time of its first event (zero if none was recorded).
func (s *Signal) Take() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.first
	s.first = time.Time{}
	return t
}
