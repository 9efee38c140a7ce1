package metrics

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

// floodFilter is a filter with the default budget and TTLs on a fake clock.
func floodFilter(rv *fakeReviewer, clock *fakeClock) http.Handler {
	f := NewAuthFilter(AuthConfig{Reviewer: rv, Now: clock.now})
	return f.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
}

// A token flood from one source: it sends 100 random bearer tokens a second for five
// minutes while Prometheus scrapes every 30 s (its cached decision expiring every 2 minutes): every
// scrape is allowed, and the flood costs its source's budget only.
func TestReviewBudgetOneSourceFlood(t *testing.T) {
	rv := reviewer()
	clock := newClock()
	h := floodFilter(rv, clock)
	const prom, attacker = "10.0.5.7:40000", "10.0.9.9:50000"
	throttled, scrapes := 0, 0
	for ms := 0; ms < 300_000; ms += 10 {
		if code := getFrom(h, fmt.Sprintf("random-%d", ms), attacker); code == http.StatusTooManyRequests {
			throttled++
		}
		if ms%30_000 == 0 {
			scrapes++
			if code := getFrom(h, "prom-token", prom); code != 200 {
				t.Fatalf("scrape at %d s during the flood: %d", ms/1000, code)
			}
		}
		clock.add(10 * time.Millisecond)
	}
	tr, sar := rv.calls()
	// The source's budget: a burst of 3, then one a second; Prometheus' token once per 2 minutes.
	if maxTR := 3 + 300 + 3; tr > maxTR {
		t.Errorf("%d TokenReviews in 5 minutes, want at most %d", tr, maxTR)
	}
	if sar != 3 {
		t.Errorf("%d SubjectAccessReviews, want 3 (Prometheus' token at 0, 120 and 240 s)", sar)
	}
	t.Logf("30 000 random tokens: %d answered 429, %d TokenReviews; %d scrapes all allowed", throttled, tr, scrapes)
}

// A flood from many sources takes the strangers' shared budget, not the known one: Prometheus'
// token is refreshed when its cached decision expires, and a new token of Prometheus' (after a
// rotation, from the source it scraped from) is reviewed too.
func TestReviewBudgetDistributedFlood(t *testing.T) {
	rv := reviewer()
	rv.users["prom-token-rotated"] = rv.users["prom-token"]
	clock := newClock()
	h := floodFilter(rv, clock)
	const prom = "10.0.5.7:40000"
	if code := getFrom(h, "prom-token", prom); code != 200 {
		t.Fatal(code)
	}
	flood := func(seconds int) {
		for i := 0; i < seconds*100; i++ {
			getFrom(h, fmt.Sprintf("random-%d-%d", seconds, i), fmt.Sprintf("10.%d.%d.1:1", i/250, i%250))
			clock.add(10 * time.Millisecond)
		}
	}
	flood(121) // the scraper's cached decision expires meanwhile
	tr0, _ := rv.calls()
	if code := getFrom(h, "prom-token", prom); code != 200 {
		t.Errorf("known token after its cache entry expired, during the flood: %d", code)
	}
	flood(5)
	if code := getFrom(h, "prom-token-rotated", prom); code != 200 {
		t.Errorf("Prometheus' rotated token from its known source, during the flood: %d", code)
	}
	for i := 0; i < 10; i++ { // the shared budget is empty at this instant
		getFrom(h, fmt.Sprintf("random-last-%d", i), fmt.Sprintf("10.201.0.%d:1", i))
	}
	if code := getFrom(h, "other-token", "10.200.0.1:1"); code != http.StatusTooManyRequests {
		t.Errorf("a stranger's token during the flood: %d, want 429", code)
	}
	tr, _ := rv.calls()
	// Shared strangers' budget: a burst of 5, then 3 a second over 126 s; plus the scraper's 3.
	if maxTR := 1 + 5 + 3*126 + 2; tr > maxTR {
		t.Errorf("%d TokenReviews, want at most %d", tr, maxTR)
	}
	t.Logf("12 600 random tokens from 12 600 sources: %d TokenReviews (%d before the refresh)", tr, tr0)
}

// A refused token is no longer known: once expired or revoked it is a stranger again.
func TestReviewBudgetForgetsRefusedTokens(t *testing.T) {
	b := newReviewBudget(AuthConfig{KnownReviewRate: 1, KnownReviewBurst: 1, SourceReviewRate: 1, SourceReviewBurst: 1, ReviewRate: 1, ReviewBurst: 1})
	now := newClock().now()
	key := [32]byte{1}
	src := sourceOfRemote("10.0.0.1:1")
	b.allowed(key, src, now)
	if !known(b.tokens, key, now) {
		t.Fatal("allowed token not known")
	}
	b.refused(key)
	if known(b.tokens, key, now) {
		t.Error("refused token still known")
	}
	if known(b.tokens, key, now.Add(knownFor)) {
		t.Error("known for longer than knownFor")
	}
}
