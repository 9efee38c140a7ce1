package publisher

import (
	"testing"
	"time"
)

func TestRevertBackoff(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	type step struct {
		at   int // seconds
		want time.Duration
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"a single revert is rewritten at once", []step{{0, 0}}},
		{"kubelet every 10s: backoff engages at the third and doubles", []step{
			{0, 0}, {10, 0}, {20, 10 * time.Second}, {40, 20 * time.Second}, {70, 40 * time.Second},
			{120, 80 * time.Second}, {210, 160 * time.Second}, {380, 320 * time.Second},
			{710, 600 * time.Second}, {1320, 600 * time.Second}}},
		{"reverts spread wider than the window never back off", []step{
			{0, 0}, {130, 0}, {260, 0}, {390, 0}}},
		{"quiet for longer than the window and twice the delay resets", []step{
			{0, 0}, {10, 0}, {20, 10 * time.Second}, {40, 20 * time.Second},
			{200, 0}, {210, 0}, {220, 10 * time.Second}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := revertBackoff{Threshold: 3, Window: 2 * time.Minute, Base: 10 * time.Second, Max: 10 * time.Minute}
			for i, s := range tc.steps {
				if got := b.Revert(at(s.at)); got != s.want {
					t.Fatalf("step %d (t=%ds): delay %v, want %v", i, s.at, got, s.want)
				}
				wantNB := time.Time{}
				if s.want > 0 {
					wantNB = at(s.at).Add(s.want)
				}
				if got := b.NotBefore(); !got.Equal(wantNB) {
					t.Fatalf("step %d: NotBefore %v, want %v", i, got, wantNB)
				}
			}
		})
	}
}
