package publisher

import (
	"testing"
	"time"
)

// Each delay lies between the exponential step and half as much again, never beyond 1.5 × max, and
// agents starting together do not retry together.
func TestRetryBackoffDoublesWithJitter(t *testing.T) {
	const min, max = 500 * time.Millisecond, 8 * time.Second
	b := retryBackoff(min, max)
	base := min
	for i := range 8 {
		d := b.Step()
		if d < base || d > base+base/2 {
			t.Fatalf("step %d: delay %s, want within [%s, %s]", i, d, base, base+base/2)
		}
		base = base * 2
		if base > max {
			base = max
		}
	}
	firsts := map[time.Duration]bool{}
	for range 50 {
		fresh := retryBackoff(min, max)
		firsts[fresh.Step()] = true
	}
	if len(firsts) < 10 {
		t.Errorf("50 agents' first retry delays take only %d distinct values: no jitter", len(firsts))
	}
}
