package metrics

import (
	"net/netip"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// reviewBudget decides which cache misses may cost API requests, so that random bearer tokens sent
// from the network can neither flood the API server nor crowd out Prometheus:
//   - a token allowed before (its cached decision expired), and a new token from a source that
//     presented an allowed token before (Prometheus' rotated token), draw on the known budget,
//     which strangers cannot reach;
//   - any other token draws first on its source's budget (an IPv4 address, an IPv6 /64), then on
//     the strangers' shared budget.
//
// The API server sees at most the known plus the strangers' rate; one source at most its own.
type reviewBudget struct {
	mu        sync.Mutex
	known     *rate.Limiter
	strangers *rate.Limiter
	perSource struct {
		limit rate.Limit
		burst int
		m     map[netip.Prefix]*sourceLimiter
	}
	tokens  map[[32]byte]time.Time     // allowed tokens → when last allowed
	sources map[netip.Prefix]time.Time // sources of allowed tokens → when last allowed
}

type sourceLimiter struct {
	*rate.Limiter
	used time.Time
}

// Bounds of what the budget remembers: a few scrapers, and the sources seen within the last burst
// of strangers. Beyond them the least recently used entry goes.
const (
	knownRemembered   = 64
	sourcesRemembered = 1024
	knownFor          = 24 * time.Hour // a ServiceAccount token lives at most a day by default
)

func newReviewBudget(cfg AuthConfig) *reviewBudget {
	b := &reviewBudget{
		known:     rate.NewLimiter(cfg.KnownReviewRate, cfg.KnownReviewBurst),
		strangers: rate.NewLimiter(cfg.ReviewRate, cfg.ReviewBurst),
		tokens:    map[[32]byte]time.Time{},
		sources:   map[netip.Prefix]time.Time{},
	}
	b.perSource.limit, b.perSource.burst = cfg.SourceReviewRate, cfg.SourceReviewBurst
	b.perSource.m = map[netip.Prefix]*sourceLimiter{}
	return b
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
	l, ok := b.perSource.m[src]
	if !ok {
		if len(b.perSource.m) >= sourcesRemembered {
			var oldest netip.Prefix
			var at time.Time
			for p, o := range b.perSource.m {
				if at.IsZero() || o.used.Before(at) {
					oldest, at = p, o.used
				}
			}
			delete(b.perSource.m, oldest)
		}
		l = &sourceLimiter{Limiter: rate.NewLimiter(b.perSource.limit, b.perSource.burst)}
		b.perSource.m[src] = l
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
		var oldest K
		var at time.Time
		for o, t := range m {
			if at.IsZero() || t.Before(at) {
				oldest, at = o, t
			}
		}
		delete(m, oldest)
	}
	m[k] = now
}
