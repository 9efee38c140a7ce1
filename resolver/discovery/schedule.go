package discovery

import (
	"math"
	"net/netip"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// intervalJitter spreads re-checks, so that a fleet started together does not probe together.
const intervalJitter = 0.1

// schedule decides when a family is probed next: at once when asked, every Interval (jittered)
// after a good round, and with jittered exponential backoff after a failed one.
type schedule struct {
	interval time.Duration
	retry    wait.Backoff // the policy; cur is the sequence in progress
	cur      wait.Backoff
	next     time.Time // zero: probe at once
	jitter   func(time.Duration, float64) time.Duration
}

func newSchedule(interval, firstRetry time.Duration) schedule {
	if firstRetry > interval {
		firstRetry = interval
	}
	b := wait.Backoff{Duration: firstRetry, Factor: 2, Jitter: 0.5, Steps: math.MaxInt32, Cap: interval}
	return schedule{interval: interval, retry: b, cur: b, jitter: wait.Jitter}
}

// now asks for a probe at once (a new route source: the NAT may map it elsewhere).
func (s *schedule) now() { s.next = time.Time{} }

// due reports whether a probe is due at t.
func (s *schedule) due(t time.Time) bool { return !s.next.After(t) }

// succeeded schedules the next re-check and resets the backoff.
func (s *schedule) succeeded(t time.Time) {
	s.cur = s.retry
	s.next = t.Add(s.jitter(s.interval, intervalJitter))
}

// failed schedules a retry after the next backoff step.
func (s *schedule) failed(t time.Time) {
	d := s.cur.Step()
	if limit := time.Duration(float64(s.interval) * (1 + intervalJitter)); d > limit {
		d = limit
	}
	s.next = t.Add(d)
}

// answer is the last address a majority agreed on, and when; it stays current for staleAfter
// after the last round that confirmed it.
type answer struct {
	addr netip.Addr
	at   time.Time
}

// current reports whether the answer may still be used at t.
func (a answer) current(t time.Time, staleAfter time.Duration) bool {
	return a.addr.IsValid() && t.Before(a.expires(staleAfter))
}

// expires is when the answer stops being current unless a round confirms it.
func (a answer) expires(staleAfter time.Duration) time.Time { return a.at.Add(staleAfter) }
