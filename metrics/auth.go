package metrics

import (
	"cmp"
	"context"
	"crypto/sha256"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
)

// User is who a bearer token belongs to, as the API server's TokenReview reports it.
type User struct {
	Name   string
	UID    string
	Groups []string
	Extra  map[string][]string
}

// Reviewer asks the API server about a scraper: TokenReview, then SubjectAccessReview.
type Reviewer interface {
	// Authenticate returns the token's user, or ok=false when the API server does not know it.
	Authenticate(ctx context.Context, token string) (u User, ok bool, err error)
	// Authorize reports whether u may send a non-resource request with verb to path.
	Authorize(ctx context.Context, u User, verb, path string) (allowed bool, err error)
}

// Decision is the outcome of checking one request.
type Decision int

const (
	Allowed         Decision = iota
	Unauthenticated          // no token, or one the API server does not know: 401
	Forbidden                // a known user without get on the path: 403
	Failed                   // the API server could not be asked: 503, not cached
	Throttled                // too many tokens not in the cache: 429, not cached
)

func (d Decision) String() string {
	return [...]string{"allowed", "unauthenticated", "forbidden", "error", "throttled"}[d]
}

// AuthConfig configures an AuthFilter. Zero values take the defaults in brackets.
type AuthConfig struct {
	Reviewer Reviewer
	// Scrapers, when set, are the usernames allowed (case-sensitive, as the API server's are),
	// authorized here without a SubjectAccessReview: the agent then needs no `create` on
	// subjectaccessreviews, which no admission policy can narrow (docs/security.md).
	Scrapers []string
	// AllowedTTL is how long an allowed token is trusted without asking again [2m]; DeniedTTL the
	// same for a refused one [10s], so that a fixed RoleBinding takes effect quickly.
	AllowedTTL, DeniedTTL time.Duration
	// MaxEntries bounds the cache [256]; when full, expired entries go first, then refusals.
	MaxEntries int
	// The review budget (reviewBudget; a miss over it is answered 429 without asking): KnownReview*
	// for tokens allowed before and new tokens from their sources [2/s, 5]; SourceReview* the other
	// tokens of one source [1/s, 3]; Review* all those together [3/s, 5].
	KnownReviewRate, SourceReviewRate, ReviewRate    rate.Limit
	KnownReviewBurst, SourceReviewBurst, ReviewBurst int
	// Timeout bounds the two reviews of one miss [10s].
	Timeout  time.Duration
	Logger   *slog.Logger
	Registry prometheus.Registerer // optional: nodeaddr_metrics_auth_* counters
	Now      func() time.Time      // tests
}

// AuthFilter lets through only requests whose bearer token the API server authenticates and
// authorizes for a non-resource get on the path, as kube-rbac-proxy does. Decisions are cached by
// the SHA-256 of path and token, so that a scrape every 30 s costs no API request.
type AuthFilter struct {
	cfg    AuthConfig
	budget *reviewBudget

	mu    sync.Mutex
	cache map[[32]byte]entry

	decisions, reviews *prometheus.CounterVec
}

type entry struct {
	d       Decision
	expires time.Time
}

// NewAuthFilter returns a filter with cfg's defaults filled in.
func NewAuthFilter(cfg AuthConfig) *AuthFilter {
	cfg.AllowedTTL = cmp.Or(cfg.AllowedTTL, 2*time.Minute)
	cfg.DeniedTTL = cmp.Or(cfg.DeniedTTL, 10*time.Second)
	cfg.MaxEntries = cmp.Or(cfg.MaxEntries, 256)
	cfg.KnownReviewRate, cfg.KnownReviewBurst = cmp.Or(cfg.KnownReviewRate, 2), cmp.Or(cfg.KnownReviewBurst, 5)
	cfg.SourceReviewRate, cfg.SourceReviewBurst = cmp.Or(cfg.SourceReviewRate, 1), cmp.Or(cfg.SourceReviewBurst, 3)
	cfg.ReviewRate, cfg.ReviewBurst = cmp.Or(cfg.ReviewRate, 3), cmp.Or(cfg.ReviewBurst, 5)
	cfg.Timeout = cmp.Or(cfg.Timeout, 10*time.Second)
	cfg.Logger = cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	f := &AuthFilter{
		cfg:    cfg,
		budget: newReviewBudget(cfg),
		cache:  map[[32]byte]entry{},
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nodeaddr_metrics_auth_decisions_total",
			Help: "Requests to the metrics endpoint by authentication and authorization result (allowed, unauthenticated, forbidden, error, throttled).",
		}, []string{"result"}),
		reviews: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nodeaddr_metrics_auth_reviews_total",
			Help: "TokenReview and SubjectAccessReview requests sent to the API server for scrapers not in the cache, by kind.",
		}, []string{"kind"}),
	}
	for d := Allowed; d <= Throttled; d++ {
		f.decisions.WithLabelValues(d.String())
	}
	for _, k := range []string{"tokenreview", "subjectaccessreview"} {
		f.reviews.WithLabelValues(k)
	}
	if cfg.Registry != nil {
		cfg.Registry.MustRegister(f.decisions, f.reviews)
	}
	return f
}

// Wrap returns next behind the filter.
func (f *AuthFilter) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d := f.Decide(r.Context(), r)
		f.decisions.WithLabelValues(d.String()).Inc()
		if d != Allowed {
			// A refused client does not keep one of the listener's few connections idle.
			w.Header().Set("Connection", "close")
		}
		switch d {
		case Allowed:
			next.ServeHTTP(w, r)
		case Unauthenticated:
			w.Header().Set("WWW-Authenticate", `Bearer realm="nodeaddr"`)
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
		case Forbidden:
			http.Error(w, "Forbidden", http.StatusForbidden)
		case Throttled:
			w.Header().Set("Retry-After", "1")
			http.Error(w, "Too many unknown tokens", http.StatusTooManyRequests)
		default:
			http.Error(w, "Authorization unavailable", http.StatusServiceUnavailable)
		}
	})
}

// Decide checks the request's bearer token against the cache, else the API server.
func (f *AuthFilter) Decide(ctx context.Context, r *http.Request) Decision {
	token, ok := bearer(r.Header.Get("Authorization"))
	if !ok {
		return Unauthenticated // no API request for a request without credentials
	}
	// Keyed by path too: a decision is about one non-resource URL.
	key := sha256.Sum256([]byte(r.URL.Path + "\x00" + token))
	now := f.cfg.Now()
	f.mu.Lock()
	e, hit := f.cache[key]
	f.mu.Unlock()
	if hit && now.Before(e.expires) {
		return e.d
	}
	src := sourceOfRemote(r.RemoteAddr)
	if !f.budget.allow(key, src, now) {
		return Throttled
	}
	ctx, cancel := context.WithTimeout(ctx, f.cfg.Timeout)
	defer cancel()
	d, user, err := f.review(ctx, token, r.URL.Path)
	if err != nil {
		f.cfg.Logger.Warn("cannot authorize a metrics scraper", "err", err)
		return Failed
	}
	ttl := f.cfg.AllowedTTL
	if d == Allowed {
		f.budget.allowed(key, src, now)
	} else {
		f.cfg.Logger.Debug("metrics request refused", "reason", d.String(), "user", user, "remote", r.RemoteAddr)
		ttl = f.cfg.DeniedTTL
		f.budget.refused(key)
	}
	f.store(key, entry{d: d, expires: now.Add(ttl)}, now)
	return d
}

func (f *AuthFilter) review(ctx context.Context, token, path string) (Decision, string, error) {
	f.reviews.WithLabelValues("tokenreview").Inc()
	u, ok, err := f.cfg.Reviewer.Authenticate(ctx, token)
	if err != nil {
		return Failed, "", err
	}
	if !ok {
		return Unauthenticated, "", nil
	}
	allowed := u.Name != "" && slices.Contains(f.cfg.Scrapers, u.Name)
	if len(f.cfg.Scrapers) == 0 {
		f.reviews.WithLabelValues("subjectaccessreview").Inc()
		if allowed, err = f.cfg.Reviewer.Authorize(ctx, u, http.MethodGet, path); err != nil {
			return Failed, u.Name, err
		}
	}
	if !allowed {
		return Forbidden, u.Name, nil
	}
	return Allowed, u.Name, nil
}

// store adds e; while the cache is full it drops expired entries, then refusals, then any.
func (f *AuthFilter) store(key [32]byte, e entry, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.cache[key]; !ok && len(f.cache) >= f.cfg.MaxEntries {
		maps.DeleteFunc(f.cache, func(_ [32]byte, old entry) bool { return !now.Before(old.expires) })
		// Refusals go before scrapers: random tokens must not push Prometheus out.
		for _, evictAllowed := range []bool{false, true} {
			for k, old := range f.cache {
				if len(f.cache) < f.cfg.MaxEntries {
					break
				}
				if (old.d == Allowed) == evictAllowed {
					delete(f.cache, k)
				}
			}
		}
	}
	f.cache[key] = e
}

// bearer extracts the token of an "Authorization: Bearer TOKEN" header.
func bearer(h string) (string, bool) {
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}
