package metrics

import (
	"net/netip"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// The review budget: the TokenReviews unknown tokens may cost, per source and in all (a token
// flood cannot exhaust them).

// reviewBudget decides which cache misses may cost API requests, so that random tokens from the
// network can neither flood the API server nor crowd out Prometheus: a token allowed before, and a
// new token from a source that presented an allowed one (Prometheus' rotated token), draw on the
// known budget, which strangers cannot reach; any other token draws on its source's budget (an IPv4
// address, an IPv6 /64), then on the strangers' shared one.
type reviewBudget struct {
	mu        sync.Mutex
	known     *rate.Limiter
	strangers *rate.Limiter
	srcLimit  rate.Limit
	srcBurst  int
	perSource map[netip.Prefix]*sourceLimiter
	tokens    map[[32]byte]time.Time     // allowed tokens → when last allowed
	sources   map[netip.Prefix]time.Time // sources of allowed tokens → when last allowed
}

type sourceLimiter struct {
	*rate.Limiter
	used time.Time
}

// Bounds of what the budget remembers, beyond which the least recently used entry goes.
const (
	knownRemembered   = 64
	sourcesRemembered = 1024
	knownFor          = 24 * time.Hour // a ServiceAccount token lives at most a day by default
)

func newReviewBudget(cfg AuthConfig) *reviewBudget {
	return &reviewBudget{
		known:     rate.NewLimiter(cfg.KnownReviewRate, cfg.KnownReviewBurst),
		strangers: rate.NewLimiter(cfg.ReviewRate, cfg.ReviewBurst),
		srcLimit:  cfg.SourceReviewRate, srcBurst: cfg.SourceReviewBurst,
		perSource: map[netip.Prefix]*sourceLimiter{},
		tokens:    map[[32]byte]time.Time{},
		sources:   map[netip.Prefix]time.Time{},
	}
}

// allow reports whether a miss for token key from src may be reviewed now.
func (b *reviewBudget) allow(key [32]byte, src netip.Prefix, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if known(b.tokens, key, now) {
		return b.known.AllowN(now, 1)
	}
	if !b.source(src, now).AllowN(now, 1) {
		return false
	}
	if known(b.sources, src, now) {
		return b.known.AllowN(now, 1)
	}
	return b.strangers.AllowN(now, 1)
}

// allowed records that key, presented from src, was allowed.
func (b *reviewBudget) allowed(key [32]byte, src netip.Prefix, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	remember(b.tokens, key, now, knownRemembered)
	remember(b.sources, src, now, knownRemembered)
}

// refused forgets key (an expired or revoked token is a stranger again).
func (b *reviewBudget) refused(key [32]byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.tokens, key)
}

func (b *reviewBudget) source(src netip.Prefix, now time.Time) *sourceLimiter {
	l, ok := b.perSource[src]
	if !ok {
		if len(b.perSource) >= sourcesRemembered {
			used := func(_ netip.Prefix, l *sourceLimiter) (time.Time, bool) { return l.used, true }
			delete(b.perSource, oldest(b.perSource, used))
		}
		l = &sourceLimiter{Limiter: rate.NewLimiter(b.srcLimit, b.srcBurst)}
		b.perSource[src] = l
	}
	l.used = now
	return l
}

func known[K comparable](m map[K]time.Time, k K, now time.Time) bool {
	at, ok := m[k]
	return ok && now.Sub(at) < knownFor
}

// remember sets m[k] = now, dropping the least recently set entry beyond n.
func remember[K comparable](m map[K]time.Time, k K, now time.Time, n int) {
	if _, ok := m[k]; !ok && len(m) >= n {
		delete(m, oldest(m, func(_ K, t time.Time) (time.Time, bool) { return t, true }))
	}
	m[k] = now
}

// oldest returns the key of m with the earliest time among those at accepts (the zero K: none); the
// connection budget's choice of whom to close too.
func oldest[K comparable, V any](m map[K]V, at func(K, V) (time.Time, bool)) K {
	var k K
	var first time.Time
	for o, v := range m {
		if t, ok := at(o, v); ok && (first.IsZero() || t.Before(first)) {
			k, first = o, t
		}
	}
	return k
}
