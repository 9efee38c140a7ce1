package discovery

import (
	"net/netip"
	"testing"
	"time"
)

func TestSchedule(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	s := newSchedule(5*time.Minute, 5*time.Second)
	if !s.due(t0) {
		t.Fatal("a new schedule is not due at once")
	}
	s.succeeded(t0)
	if d := s.next.Sub(t0); d < 5*time.Minute || d > 5*time.Minute+30*time.Second {
		t.Errorf("after success, next in %s, want 5m to 5m30s (interval plus at most 10%% jitter)", d)
	}
	if s.due(t0.Add(4 * time.Minute)) {
		t.Error("due before the interval")
	}
	s.now()
	if !s.due(t0.Add(time.Second)) {
		t.Error("now() does not make it due (a new route source is probed at once)")
	}

	// Failures back off exponentially with jitter (factor 2, up to +50 %), capped at the interval.
	at := t0
	low, high := 5*time.Second, 5*time.Second
	for i := range 12 {
		s.failed(at)
		d := s.next.Sub(at)
		if d < min(low, 5*time.Minute) || d > min(high*3/2, 5*time.Minute+30*time.Second) {
			t.Errorf("failure %d: retry in %s, want [%s, %s]", i+1, d, min(low, 5*time.Minute), min(high*3/2, 5*time.Minute+30*time.Second))
		}
		low, high = low*2, high*2
		at = s.next
	}
	// A success resets the backoff.
	s.succeeded(at)
	s.failed(at)
	if d := s.next.Sub(at); d < 5*time.Second || d > 7500*time.Millisecond {
		t.Errorf("first retry after a success in %s, want 5s to 7.5s", d)
	}
}

func TestScheduleFirstRetryAboveInterval(t *testing.T) {
	t0 := time.Unix(0, 0)
	s := newSchedule(2*time.Second, 5*time.Second)
	s.failed(t0)
	if d := s.next.Sub(t0); d > 2200*time.Millisecond {
		t.Errorf("retry in %s, longer than the interval with its jitter", d)
	}
}

func TestAnswerStaleness(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	a := answer{addr: netip.MustParseAddr("203.0.113.10"), at: t0}
	for _, tc := range []struct {
		after time.Duration
		want  bool
	}{{0, true}, {59 * time.Minute, true}, {time.Hour - time.Nanosecond, true}, {time.Hour, false}, {2 * time.Hour, false}} {
		if got := a.current(t0.Add(tc.after), time.Hour); got != tc.want {
			t.Errorf("%s after the answer: current = %v, want %v", tc.after, got, tc.want)
		}
	}
	if (answer{}).current(t0, time.Hour) {
		t.Error("the zero answer is current")
	}
	if got := a.expires(time.Hour); !got.Equal(t0.Add(time.Hour)) {
		t.Errorf("expires = %s", got)
	}
}
