package publisher

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

const minRetry, retryPeriod = 500 * time.Millisecond, 20 * time.Second

// fakeClock is a settable clock for retrySchedule.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

// schedule returns a retry schedule whose draw is r and whose clock is c.
func schedule(r float64, c *fakeClock) *retrySchedule {
	s := newRetrySchedule(minRetry, retryPeriod)
	s.rand = func() float64 { return r }
	s.now = c.now
	return s
}

// The attempts fall on anchor/2^j (from the first at or after min) and then every period after the
// anchor, which is period·(1+r).
func TestRetryScheduleTimes(t *testing.T) {
	ms := func(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }
	for _, tc := range []struct {
		r    float64
		want []time.Duration
	}{
		{0, []time.Duration{ms(625), ms(625), ms(1250), ms(2500), ms(5000), ms(10000), ms(20000), retryPeriod, retryPeriod}},
		{0.5, []time.Duration{ms(937.5), ms(937.5), ms(1875), ms(3750), ms(7500), ms(15000), retryPeriod, retryPeriod}},
		{0.75, []time.Duration{ms(546.875), ms(546.875), ms(1093.75), ms(2187.5), ms(4375), ms(8750), ms(17500), retryPeriod, retryPeriod}},
	} {
		t.Run(fmt.Sprint(tc.r), func(t *testing.T) {
			c := &fakeClock{t: time.Unix(1000, 0)}
			s := schedule(tc.r, c)
			var got []time.Duration
			for range tc.want {
				d := s.When(0)
				got = append(got, d)
				c.advance(d) // the attempt fails at once
			}
			assertEqual(t, "delays", got, tc.want)
		})
	}
}

// The grid is fixed in time from the first failure: an attempt that takes long skips the points it
// missed instead of shifting the later ones; Forget starts a new backoff from the next failure,
// with a new draw.
func TestRetryScheduleKeepsItsGrid(t *testing.T) {
	c := &fakeClock{t: time.Unix(1000, 0)}
	draws := []float64{0, 0.5}
	s := schedule(0, c)
	s.rand = func() float64 { r := draws[0]; draws = draws[1:]; return r }
	step := func(took time.Duration, want time.Duration) {
		t.Helper()
		c.advance(took)
		if got := s.When(0); got != want {
			t.Fatalf("after an attempt of %s: delay %s, want %s", took, got, want)
		}
		c.advance(want)
	}
	step(0, 625*time.Millisecond)              // anchor 20 s: points 0.625, 1.25, 2.5, 5, 10, 20, 40 …
	step(3*time.Second, 1375*time.Millisecond) // at 3.625 s: next point 5 s
	step(30*time.Second, 5*time.Second)        // at 35 s: next point 40 s
	step(0, retryPeriod)                       // at 40 s: 60 s
	s.Forget()
	c.advance(time.Hour)
	step(0, 937500*time.Microsecond) // a new backoff, anchor 30 s: first point 0.9375 s
}

// A server's Retry-After is a lower bound, met on the grid: the delay is the first point of the
// schedule at or after it (anchor 20 s: 0.625, 1.25, 2.5, 5, 10, 20, 40 … s), so agents told to
// wait the same seconds still come back on points of their own. RetryIn reads it from the API
// error, wrapped as the writes wrap it, and caps it at half a period.
func TestRetryScheduleRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want time.Duration
	}{
		{"no Retry-After", errors.New("connection refused"), 625 * time.Millisecond},
		{"priority and fairness, 1 s", apierrors.NewTooManyRequests("Too many requests", 1), 1250 * time.Millisecond},
		{"3 s", fmt.Errorf("write status: %w", apierrors.NewTooManyRequests("", 3)), 5 * time.Second},
		{"exactly on a point", apierrors.NewTooManyRequests("", 5), 5 * time.Second},
		{"8 s, APF after a few doublings", apierrors.NewTooManyRequests("", 8), 10 * time.Second},
		{"16 s, capped at half the period", apierrors.NewTooManyRequests("", 16), 10 * time.Second},
		{"32 s, APF's maximum", apierrors.NewTooManyRequests("", 32), 10 * time.Second},
		{"an hour", apierrors.NewTooManyRequests("", 3600), 10 * time.Second},
		{"a server timeout without a delay", apierrors.NewServerTimeout(schema.GroupResource{Resource: "nodes"}, "patch", 0), 625 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &fakeClock{t: time.Unix(1000, 0)}
			p := &Publisher{cfg: Config{MinBackoff: minRetry, MaxBackoff: retryPeriod}, retry: schedule(0, c)}
			if got := p.RetryIn(tc.err); got != tc.want {
				t.Errorf("delay %s, want %s", got, tc.want)
			}
		})
	}
}

// An agent already on its period (anchor 20 s; an attempt due at the point 40 s) keeps its next
// point, 60 s, whatever priority and fairness answers: the Retry-After counts from when the attempt
// began, not from the answer, which came after the request waited in the server's queue, and it is
// capped at half a period, as an attempt begins a little after its point.
func TestRetryAfterKeepsTheNextPoint(t *testing.T) {
	for _, tc := range []struct {
		name       string
		late, took time.Duration // the attempt began late after its point, and was answered took after
		retryAfter int
		want       time.Duration // counted from the answer: 39.8 s, 5 s, 25 s, 25 s, 39.75 s
	}{
		{"answered at once, 32 s", 0, 200 * time.Millisecond, 32, 19800 * time.Millisecond},
		{"queued 15 s, 8 s", 0, 15 * time.Second, 8, 5 * time.Second},
		{"queued 15 s, 16 s", 0, 15 * time.Second, 16, 5 * time.Second},
		{"queued 15 s, 32 s", 0, 15 * time.Second, 32, 5 * time.Second},
		{"began 50 ms late, 20 s", 50 * time.Millisecond, 200 * time.Millisecond, 20, 19750 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &fakeClock{t: time.Unix(1000, 0)}
			s := schedule(0, c)
			p := &Publisher{cfg: Config{MinBackoff: minRetry, MaxBackoff: retryPeriod}, retry: s}
			p.RetryIn(errors.New("connection refused")) // the backoff starts: anchor 20 s
			c.advance(40*time.Second + tc.late)
			s.Began()
			c.advance(tc.took)
			if got := p.RetryIn(apierrors.NewTooManyRequests("", tc.retryAfter)); got != tc.want {
				t.Errorf("delay %s, want %s (the point at 60 s)", got, tc.want)
			}
		})
	}
}

// A minimum above the period leaves only the periodic part: the first attempt is the anchor.
func TestRetryScheduleMinAbovePeriod(t *testing.T) {
	c := &fakeClock{t: time.Unix(1000, 0)}
	s := newRetrySchedule(time.Hour, time.Minute)
	s.rand, s.now = func() float64 { return 0.5 }, c.now
	if d := s.When(0); d != time.Hour+30*time.Second {
		t.Errorf("first delay %s, want 1h0m30s (the first point at or after min: anchor 90 s + 59 periods)", d)
	}
}

// A fleet that lost the API server at the same moment does not come back together, however long
// the outage: of 500 agents (seeded draws), the first attempts after an outage of R lie within the
// next gap of the schedule, no tenth of the span they cover holds more than twice its share, and
// after an outage of two periods or more they cover one period evenly (no tenth above 1.4 times
// its share; a peak one-second count at most twice the mean, the goal the scale benchmark's
// TestScaleOutage holds the real fleet to).
func TestRetryScheduleSpreadsAFleet(t *testing.T) {
	const agents = 500
	for _, outage := range []time.Duration{3 * time.Second, 10 * time.Second, 25 * time.Second, 45 * time.Second, 60 * time.Second, 70 * time.Second, 200 * time.Second} {
		t.Run(outage.String(), func(t *testing.T) {
			firsts := make([]time.Duration, agents)
			for i := range firsts {
				c := &fakeClock{t: time.Unix(1000, 0)}
				s := newRetrySchedule(minRetry, retryPeriod)
				s.rand, s.now = rand.New(rand.NewPCG(uint64(i), 17)).Float64, c.now
				at := time.Duration(0)
				for at < outage {
					d := s.When(0)
					at += d
					c.advance(d)
				}
				firsts[i] = at
			}
			slices.Sort(firsts)
			lo, hi := firsts[0], firsts[agents-1]
			if hi-outage > max(outage, retryPeriod) {
				t.Errorf("last first attempt %s after recovery, want within %s", hi-outage, max(outage, retryPeriod))
			}
			share := 2.0
			if outage >= 2*retryPeriod {
				share = 1.4
				if hi-lo > retryPeriod {
					t.Errorf("first attempts span %s, want at most one period (%s)", hi-lo, retryPeriod)
				}
				if p, mean := peakPerSecond(firsts), float64(agents)/retryPeriod.Seconds(); float64(p) > 2*mean {
					t.Errorf("peak one-second count %d, want at most twice the mean %.1f", p, mean)
				}
			}
			var bins [10]int
			for _, at := range firsts {
				bins[min(int(float64(at-lo)/float64(hi-lo)*10), 9)]++
			}
			if peak := slices.Max(bins[:]); float64(peak) > share*agents/10 {
				t.Errorf("first attempts after recovery by tenth of [%s, %s]: %v, want none over %.0f", lo, hi, bins, share*agents/10)
			}
		})
	}
}

// peakPerSecond is the largest number of the sorted times within any one second.
func peakPerSecond(at []time.Duration) int {
	best, lo := 0, 0
	for hi := range at {
		for at[hi]-at[lo] >= time.Second {
			lo++
		}
		best = max(best, hi-lo+1)
	}
	return best
}
