package watcher

import (
	"sync"
	"time"
)

// Signal is a one-slot "something changed" notification: raising it never blocks, bursts coalesce,
// and Take says when the burst's first event happened (for the reaction-latency metric).
type Signal struct {
	ch          chan struct{}
	mu          sync.Mutex
	first, link time.Time
}

// NewSignal returns an empty signal.
func NewSignal() *Signal { return &Signal{ch: make(chan struct{}, 1)} }

// Raise records that something changed at now (the first since the last Take keeps its time).
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

// TakeLink clears and returns the time of the latest link event (zero if none).
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
