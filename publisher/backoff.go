package publisher

import "time"

// revertBackoff decides how long to wait before rewriting addresses that another writer reverted
// (a kubelet without --cloud-provider=external rewrites them every 10 s). After Threshold reverts
// within Window, each revert doubles the delay from Base up to Max; after a quiet Window (or twice
// the delay) it starts from scratch.
type revertBackoff struct {
	Threshold int
	Window    time.Duration
	Base, Max time.Duration

	reverts   []time.Time
	delay     time.Duration
	notBefore time.Time
}

// Revert records a revert at now and returns the delay before the next rewrite (0: at once).
func (b *revertBackoff) Revert(now time.Time) time.Duration {
	if n := len(b.reverts); n > 0 && now.Sub(b.reverts[n-1]) > max(b.Window, 2*b.delay) {
		b.reverts, b.delay = b.reverts[:0], 0
	}
	keep := b.reverts[:0]
	for _, t := range b.reverts {
		if now.Sub(t) <= b.Window || b.delay > 0 {
			keep = append(keep, t)
		}
	}
	b.reverts = append(keep, now)
	if len(b.reverts) > b.Threshold*4 {
		b.reverts = b.reverts[len(b.reverts)-b.Threshold*4:]
	}
	if len(b.reverts) >= b.Threshold {
		if b.delay == 0 {
			b.delay = b.Base
		} else {
			b.delay = min(2*b.delay, b.Max)
		}
	}
	b.notBefore = now.Add(b.delay)
	return b.delay
}

// NotBefore is the earliest time the next rewrite may happen (zero time: no restriction).
func (b *revertBackoff) NotBefore() time.Time {
	if b.delay == 0 {
		return time.Time{}
	}
	return b.notBefore
}
