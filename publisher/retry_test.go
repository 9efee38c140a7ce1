package publisher

import (
	"testing"
	"time"
)

// Each delay lies between the exponential step and half as much again, Forget starts over, and
// agents starting together do not retry together.
func TestJitteredBackoff(t *testing.T) {
	const lo, hi = 500 * time.Millisecond, 8 * time.Second
	b := newJitteredBackoff(lo, hi)
	for round := range 2 {
		base := lo
		for i := range 8 {
			d := b.When("n")
			if d < base || d > base+base/2 {
				t.Fatalf("round %d step %d: delay %s, want within [%s, %s]", round, i, d, base, base+base/2)
			}
			base = min(base*2, hi)
		}
		if got := b.NumRequeues("n"); got != 8 {
			t.Errorf("NumRequeues = %d, want 8", got)
		}
		b.Forget("n")
		if got := b.NumRequeues("n"); got != 0 {
			t.Errorf("NumRequeues after Forget = %d, want 0", got)
		}
	}
	firsts := map[time.Duration]bool{}
	for range 50 {
		firsts[newJitteredBackoff(lo, hi).When("n")] = true
	}
	if len(firsts) < 10 {
		t.Errorf("50 agents' first retry delays take only %d distinct values: no jitter", len(firsts))
	}
}
