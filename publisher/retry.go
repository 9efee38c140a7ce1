package publisher

import (
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// errConflict marks a write that lost a race with another writer (409, or a failed JSON-patch test).
var errConflict = errors.New("conflict")

// holdError defers a rewrite of reverted addresses until the revert backoff allows it.
type holdError struct{ until time.Time }

func (h holdError) Error() string { return "rewrite held back until " + h.until.Format(time.RFC3339) }

// RetryIn is how long to wait before retrying after a reconcile failed with err: a held-back
// rewrite waits for its time, a conflict (this Node's own race) retries soon, anything else backs
// off on the retry schedule, no sooner than the server's Retry-After (serverDelay).
func (p *Publisher) RetryIn(err error) time.Duration {
	var hold holdError
	switch {
	case errors.As(err, &hold):
		return max(time.Until(hold.until), time.Millisecond)
	case errors.Is(err, errConflict):
		return max(p.cfg.MinBackoff/4, time.Millisecond)
	default:
		return p.retry.When(serverDelay(err, p.cfg.MaxBackoff/2))
	}
}

// serverDelay is the Retry-After that an API error carries, at most limit, or 0.
//
// RetryIn caps it at half a retry period and counts it from when the failed attempt began, so that
// an agent retrying once a period keeps its next point: counted from the answer, or capped at a
// whole period, it delayed a 5 000-agent fleet by a period (docs/bench/outage-5000-flowschema.md).
func serverDelay(err error, limit time.Duration) time.Duration {
	s, ok := apierrors.SuggestsClientDelay(err)
	if !ok || s <= 0 {
		return 0
	}
	return min(time.Duration(s)*time.Second, limit)
}

// retrySchedule is when the driver retries after failed reconciles: a backoff that spreads a fleet
// which lost the API server at the same moment evenly over one period when it comes back.
//
// When a backoff starts, the agent draws its anchor g uniformly in [period, 2·period) and attempts
// at these times after the start, from the first at or after min (a grid fixed in time):
//
//	… g/8, g/4, g/2, g, g+period, g+2·period, …
//
// An agent's attempts after g are at a phase of the period that is uniform across agents
// (docs/BENCHMARKS.md, outage recovery); before g the geometric grid's phase is nearly uniform too.
// One random factor on an exponential schedule was flat only in log time, and per-delay jitter
// sums into a bell whose peak depends on when the server comes back.
type retrySchedule struct {
	min, period time.Duration
	rand        func() float64   // uniform in [0, 1); a seeded source in tests
	now         func() time.Time // a fake clock in tests

	mu     sync.Mutex
	start  time.Time     // first failure of the current backoff; zero: none
	anchor time.Duration // g, in [period, 2·period)
	began  time.Time     // when the latest attempt began (Began); zero if never told
}

func newRetrySchedule(min, period time.Duration) *retrySchedule {
	return &retrySchedule{min: min, period: period, rand: rand.Float64, now: time.Now}
}

// Began records that an attempt begins now: a Retry-After is counted from here.
func (s *retrySchedule) Began() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.began = s.now()
}

// When is how long to wait before the next attempt, after a failed one: the next point of the
// schedule no sooner than atLeast (the server's Retry-After, or 0) after the failed attempt began,
// which keeps a fleet that the server told to wait the same seconds spread.
func (s *retrySchedule) When(atLeast time.Duration) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if s.start.IsZero() {
		s.start = now
		s.anchor = s.period + time.Duration(s.rand()*float64(s.period))
	}
	elapsed := now.Sub(s.start)
	after := elapsed // next returns the first point after this
	if atLeast > 0 {
		from := now
		if !s.began.IsZero() && s.began.Before(now) {
			from = s.began
		}
		after = max(after, from.Add(atLeast).Sub(s.start)-1) // at or after from+atLeast
	}
	return s.next(after) - elapsed
}

// next is the first point of the schedule after elapsed (and at or after min).
func (s *retrySchedule) next(elapsed time.Duration) time.Duration {
	floor := max(elapsed+1, s.min)
	if floor <= s.anchor {
		p := s.anchor // the geometric part: halve while the half is still late enough
		for p/2 >= floor {
			p /= 2
		}
		return p
	}
	k := (floor - s.anchor + s.period - 1) / s.period
	return s.anchor + k*s.period
}

// Forget ends the backoff: the next failure starts a new one, with a new anchor.
func (s *retrySchedule) Forget() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.start = time.Time{}
}
