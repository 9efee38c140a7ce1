package publisher

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

const minRetry, maxRetry = 500 * time.Millisecond, 60 * time.Second

// seeded returns a backoff whose randomness comes from a fixed seed.
func seeded(seed uint64) *scaledBackoff {
	b := newScaledBackoff(minRetry, maxRetry)
	b.rand = rand.New(rand.NewPCG(seed, 1)).Float64
	return b
}

// An item's delays are its scale times the exponential steps, capped: the scale 2^r comes from one
// draw r when the backoff starts.
func TestScaledBackoffSchedule(t *testing.T) {
	for _, tc := range []struct {
		r    float64
		want []time.Duration
	}{
		{0, []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 32 * time.Second, maxRetry, maxRetry}},
		{0.5, []time.Duration{707106781, 1414213562, 2828427124, 5656854248, 11313708496, 22627416992, 45254833984, maxRetry, maxRetry}},
		{0.99, []time.Duration{993092495, 1986184990, 3972369980, 7944739960, 15889479920, 31778959840, maxRetry, maxRetry}},
	} {
		t.Run(fmt.Sprint(tc.r), func(t *testing.T) {
			b := newScaledBackoff(minRetry, maxRetry)
			b.rand = func() float64 { return tc.r }
			var got []time.Duration
			for range tc.want {
				got = append(got, b.When("n"))
			}
			assertEqual(t, "delays", got, tc.want)
		})
	}
}

// Each delay lies in [min·2^k, min·2^(k+1)) and at most max, doubles the one before until the cap,
// and Forget starts over with a new draw.
func TestScaledBackoffBounds(t *testing.T) {
	b := seeded(1)
	firsts := map[time.Duration]bool{}
	for round := range 20 {
		var prev time.Duration
		for k := range 10 {
			d := b.When("n")
			lo := min(minRetry<<k, maxRetry)
			if d < lo || d >= 2*lo && d != maxRetry || d > maxRetry {
				t.Fatalf("round %d step %d: delay %s, want within [%s, %s) and at most %s", round, k, d, lo, 2*lo, maxRetry)
			}
			if k > 0 && d != min(2*prev, maxRetry) {
				t.Fatalf("round %d step %d: delay %s after %s, want it doubled (up to %s)", round, k, d, prev, maxRetry)
			}
			if k == 0 {
				firsts[d] = true
			}
			prev = d
		}
		if got := b.NumRequeues("n"); got != 10 {
			t.Errorf("NumRequeues = %d, want 10", got)
		}
		b.Forget("n")
		if got := b.NumRequeues("n"); got != 0 {
			t.Errorf("NumRequeues after Forget = %d, want 0", got)
		}
	}
	if len(firsts) < 15 {
		t.Errorf("20 restarts drew only %d distinct first delays", len(firsts))
	}
}

// A fleet that lost the API server at the same moment does not come back together, however long
// the outage: the first attempt of each of 1000 agents after an outage of R lies within the next
// delay of the schedule, and no tenth of the span they cover holds more than twice its share (the
// schedule's shape alone puts 1.44 times the share in the first tenth).
func TestScaledBackoffSpreadsAFleet(t *testing.T) {
	const agents = 1000
	for _, outage := range []time.Duration{3 * time.Second, 10 * time.Second, 45 * time.Second, 62800 * time.Millisecond, 70 * time.Second, 200 * time.Second} {
		t.Run(outage.String(), func(t *testing.T) {
			firsts := make([]time.Duration, agents)
			for i := range firsts {
				b := seeded(uint64(i))
				at := time.Duration(0)
				for at < outage {
					at += b.When("n")
				}
				firsts[i] = at
			}
			lo, hi := firsts[0], firsts[0]
			for _, at := range firsts {
				lo, hi = min(lo, at), max(hi, at)
			}
			if hi-outage > max(outage+minRetry, maxRetry) {
				t.Errorf("last first attempt %s after recovery, want within %s", hi-outage, max(outage+minRetry, maxRetry))
			}
			var bins [10]int
			for _, at := range firsts {
				bins[min(int(float64(at-lo)/float64(hi-lo)*10), 9)]++
			}
			if peak := slices.Max(bins[:]); peak > 2*agents/10 {
				t.Errorf("first attempts after recovery by tenth of [%s, %s]: %v, want none over %d", lo, hi, bins, 2*agents/10)
			}
		})
	}
}
