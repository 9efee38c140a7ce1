package metrics

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// fakeReviewer knows tokens → users and users allowed to get /metrics, and counts its calls.
type fakeReviewer struct {
	mu       sync.Mutex
	users    map[string]string // token → user name
	allowed  map[string]bool   // user → may get /metrics
	fail     error
	tr, sar  int
	lastVerb string
	lastPath string
}

func (f *fakeReviewer) Authenticate(_ context.Context, token string) (User, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tr++
	if f.fail != nil {
		return User{}, false, f.fail
	}
	name, ok := f.users[token]
	return User{Name: name, Groups: []string{"system:authenticated"}}, ok, nil
}

func (f *fakeReviewer) Authorize(_ context.Context, u User, verb, path string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sar++
	f.lastVerb, f.lastPath = verb, path
	return f.allowed[u.Name], nil
}

func (f *fakeReviewer) calls() (int, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tr, f.sar
}

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time        { return c.t }
func (c *fakeClock) add(d time.Duration)   { c.t = c.t.Add(d) }
func newClock() *fakeClock                 { return &fakeClock{time.Unix(1_700_000_000, 0)} }
func get(h http.Handler, token string) int { return getFrom(h, token, "192.0.2.1:1234") }

// getFrom sends token from the client address remote ("ip:port").
func getFrom(h http.Handler, token, remote string) int {
	r := httptest.NewRequest("GET", "/metrics", nil)
	r.RemoteAddr = remote
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Code
}

func newFilter(rv *fakeReviewer, clock *fakeClock) (*AuthFilter, http.Handler) {
	f := NewAuthFilter(AuthConfig{Reviewer: rv, Now: clock.now, ReviewRate: 1000, ReviewBurst: 1000})
	return f, f.Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "metrics") }))
}

func reviewer() *fakeReviewer {
	return &fakeReviewer{
		users:   map[string]string{"prom-token": "system:serviceaccount:monitoring:prometheus", "other-token": "system:serviceaccount:default:app"},
		allowed: map[string]bool{"system:serviceaccount:monitoring:prometheus": true},
	}
}

func TestAuthFilterDecisions(t *testing.T) {
	for _, tc := range []struct {
		name, header string
		code         int
		tr, sar      int
	}{
		{"no header: no API request", "", 401, 0, 0},
		{"basic auth is not a bearer token", "Basic dXNlcjpwYXNz", 401, 0, 0},
		{"empty bearer token", "Bearer ", 401, 0, 0},
		{"unknown token", "Bearer forged", 401, 1, 0},
		{"known user without the role", "Bearer other-token", 403, 1, 1},
		{"scraper with get /metrics", "Bearer prom-token", 200, 1, 1},
		{"scheme is case-insensitive", "bearer prom-token", 200, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rv := reviewer()
			_, h := newFilter(rv, newClock())
			r := httptest.NewRequest("GET", "/metrics", nil)
			if tc.header != "" {
				r.Header.Set("Authorization", tc.header)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tc.code {
				t.Errorf("code %d, want %d", w.Code, tc.code)
			}
			if tc.code != 200 && w.Body.String() == "metrics\n" {
				t.Errorf("refused request got the metrics")
			}
			if closes := w.Header().Get("Connection") == "close"; closes != (tc.code != 200) {
				t.Errorf("Connection: close on a %d: %v", w.Code, closes)
			}
			if tr, sar := rv.calls(); tr != tc.tr || sar != tc.sar {
				t.Errorf("API calls: %d TokenReviews, %d SubjectAccessReviews; want %d, %d", tr, sar, tc.tr, tc.sar)
			}
			if tc.sar > 0 && (rv.lastVerb != "GET" && rv.lastVerb != "get" || rv.lastPath != "/metrics") {
				t.Errorf("SubjectAccessReview for %s %s, want get /metrics", rv.lastVerb, rv.lastPath)
			}
		})
	}
}

// A scrape every 30 s costs two API requests per TTL, not per scrape; a refused token is asked
// again after the shorter denied TTL.
func TestAuthFilterCachesDecisions(t *testing.T) {
	rv := reviewer()
	clock := newClock()
	_, h := newFilter(rv, clock)
	for i := 0; i < 4; i++ { // 0, 30, 60, 90 s
		if code := get(h, "prom-token"); code != 200 {
			t.Fatalf("scrape %d: %d", i, code)
		}
		clock.add(30 * time.Second)
	}
	if tr, sar := rv.calls(); tr != 1 || sar != 1 {
		t.Fatalf("4 scrapes within the allowed TTL: %d TokenReviews, %d SubjectAccessReviews; want 1, 1", tr, sar)
	}
	clock.add(30 * time.Second) // 150 s after the first review: expired
	get(h, "prom-token")
	if tr, sar := rv.calls(); tr != 2 || sar != 2 {
		t.Fatalf("after the allowed TTL: %d, %d API calls; want 2, 2", tr, sar)
	}

	for i := 0; i < 5; i++ {
		if code := get(h, "other-token"); code != 403 {
			t.Fatalf("other-token: %d", code)
		}
		if code := get(h, "forged"); code != 401 {
			t.Fatalf("forged: %d", code)
		}
	}
	if tr, sar := rv.calls(); tr != 4 || sar != 3 {
		t.Fatalf("repeated refused tokens: %d, %d API calls; want 4, 3", tr, sar)
	}
	// The role is granted: within the denied TTL the refusal stands, after it the scrape passes.
	rv.mu.Lock()
	rv.allowed["system:serviceaccount:default:app"] = true
	rv.mu.Unlock()
	if code := get(h, "other-token"); code != 403 {
		t.Fatalf("within the denied TTL: %d", code)
	}
	clock.add(11 * time.Second)
	if code := get(h, "other-token"); code != 200 {
		t.Fatalf("after the denied TTL: %d", code)
	}
}

// An API error is answered 503 and not cached: the next scrape asks again.
func TestAuthFilterErrorsAreNotCached(t *testing.T) {
	rv := reviewer()
	rv.fail = errors.New("connection refused")
	_, h := newFilter(rv, newClock())
	if code := get(h, "prom-token"); code != 503 {
		t.Fatalf("API down: %d, want 503", code)
	}
	rv.mu.Lock()
	rv.fail = nil
	rv.mu.Unlock()
	if code := get(h, "prom-token"); code != 200 {
		t.Fatalf("API back: %d, want 200", code)
	}
	if tr, _ := rv.calls(); tr != 2 {
		t.Fatalf("%d TokenReviews, want 2", tr)
	}
}

// Random tokens cannot grow the cache beyond its bound, and a cached scraper keeps working while
// the review rate limit refuses further unknown tokens without asking the API server.
func TestAuthFilterBoundedAndRateLimited(t *testing.T) {
	rv := reviewer()
	clock := newClock()
	f := NewAuthFilter(AuthConfig{Reviewer: rv, Now: clock.now, MaxEntries: 16, ReviewRate: 1, ReviewBurst: 20, SourceReviewBurst: 1000})
	h := f.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	if code := get(h, "prom-token"); code != 200 {
		t.Fatal(code)
	}
	stranger := func(token string) int { return getFrom(h, token, "198.51.100.7:4321") }
	for i := 0; i < 100; i++ {
		stranger(fmt.Sprintf("random-%d", i))
		if len(f.cache) > 16 {
			t.Fatalf("cache holds %d entries, bound 16", len(f.cache))
		}
	}
	tr, _ := rv.calls()
	if tr != 20 {
		t.Errorf("%d TokenReviews for 101 tokens with a burst of 20 and a stopped clock, want 20", tr)
	}
	if code := get(h, "prom-token"); code != 200 {
		t.Errorf("the scraper after the flood: %d, want 200 from the cache", code)
	}
	if tr2, _ := rv.calls(); tr2 != tr {
		t.Errorf("the scraper was pushed out of the cache by random tokens")
	}
	if code := stranger("random-x"); code != http.StatusTooManyRequests {
		t.Errorf("unknown token over the rate: %d, want 429", code)
	}
	clock.add(time.Second)
	if code := stranger("random-y"); code != 401 {
		t.Errorf("unknown token a second later: %d, want 401", code)
	}
}

// The cost a scrape pays for the check once its token is cached.
func BenchmarkAuthFilterCached(b *testing.B) {
	rv := reviewer()
	f := NewAuthFilter(AuthConfig{Reviewer: rv})
	r := httptest.NewRequest("GET", "/metrics", nil)
	r.Header.Set("Authorization", "Bearer prom-token")
	if d := f.Decide(context.Background(), r); d != Allowed {
		b.Fatal(d)
	}
	b.ReportAllocs()
	for b.Loop() {
		f.Decide(context.Background(), r)
	}
	if tr, _ := rv.calls(); tr != 1 {
		b.Fatalf("%d TokenReviews", tr)
	}
}

func TestAuthFilterCountsOnlyRealReviews(t *testing.T) {
	for _, tc := range []struct {
		name     string
		scrapers []string
		sar      float64
	}{
		{"SubjectAccessReview", nil, 1},
		{"allow-list", []string{"system:serviceaccount:monitoring:prometheus"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := NewAuthFilter(AuthConfig{Reviewer: reviewer(), Scrapers: tc.scrapers, ReviewRate: 1000,
				ReviewBurst: 1000})
			h := f.Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
			if code := get(h, "prom-token"); code != 200 {
				t.Fatalf("scrape: %d", code)
			}
			if got := testutil.ToFloat64(f.reviews.WithLabelValues("subjectaccessreview")); got != tc.sar {
				t.Errorf("subjectaccessreview reviews counted %v, want %v", got, tc.sar)
			}
			if got := testutil.ToFloat64(f.reviews.WithLabelValues("tokenreview")); got != 1 {
				t.Errorf("tokenreview reviews counted %v, want 1", got)
			}
		})
	}
}
