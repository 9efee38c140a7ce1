package agentcmd

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/nodeaddr/nodeaddr/metrics"
)

func TestParseScrapers(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want string // joined with ","
		err  string
	}{
		{nil, "", ""},
		{[]string{""}, "", ""}, // an unset ConfigMap key
		{[]string{"system:serviceaccount:monitoring:prometheus-k8s", " "}, "system:serviceaccount:monitoring:prometheus-k8s", ""},
		{[]string{"a", "a", "b"}, "a,b", ""},
		{[]string{"monitoring/prometheus-k8s"}, "", `"monitoring/prometheus-k8s" is not a username`},
		{[]string{"system:serviceaccount:prometheus-k8s"}, "", "system:serviceaccount:NAMESPACE:NAME"},
		{[]string{"system:serviceaccount:a:b:c"}, "", "system:serviceaccount:NAMESPACE:NAME"},
	} {
		got, err := parseScrapers(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || strings.Join(got, ",") != tc.want {
			t.Errorf("%q: %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

// stubReviewer authenticates every token as user and counts what it was asked.
type stubReviewer struct {
	user       string
	authorized int
}

func (s *stubReviewer) Authenticate(context.Context, string) (metrics.User, bool, error) {
	return metrics.User{Name: s.user}, true, nil
}

func (s *stubReviewer) Authorize(context.Context, metrics.User, string, string) (bool, error) {
	s.authorized++
	return true, nil
}

func TestAllowListReviewer(t *testing.T) {
	const prom = "system:serviceaccount:monitoring:prometheus-k8s"
	for _, tc := range []struct {
		user    string
		list    []string
		allowed bool
	}{
		{prom, []string{prom}, true},
		{"system:serviceaccount:monitoring:other", []string{prom}, false},
		{"System:ServiceAccount:monitoring:prometheus-k8s", []string{prom}, false},
		{"", []string{""}, false},
	} {
		inner := &stubReviewer{user: tc.user}
		f := metrics.NewAuthFilter(metrics.AuthConfig{Reviewer: inner, Scrapers: tc.list})
		r := httptest.NewRequest("GET", "/metrics", nil)
		r.Header.Set("Authorization", "Bearer t")
		if got := f.Decide(context.Background(), r); (got == metrics.Allowed) != tc.allowed {
			t.Errorf("%q in %q: %v; want allowed %v", tc.user, tc.list, got, tc.allowed)
		}
		if inner.authorized != 0 {
			t.Errorf("%q: the allow-list sent %d SubjectAccessReviews, want 0", tc.user, inner.authorized)
		}
	}
	// Without a list the API server's SubjectAccessReview decides.
	inner := &stubReviewer{user: prom}
	r := httptest.NewRequest("GET", "/metrics", nil)
	r.Header.Set("Authorization", "Bearer t")
	metrics.NewAuthFilter(metrics.AuthConfig{Reviewer: inner}).Decide(context.Background(), r)
	if inner.authorized != 1 {
		t.Errorf("without a list: %d SubjectAccessReviews, want 1", inner.authorized)
	}
}

func TestScraperFlag(t *testing.T) {
	o, err := parse([]string{"--node-name=a", "--metrics-allowed-scrapers=system:serviceaccount:m:p,,system:serviceaccount:m:q"}, env())
	if err != nil || strings.Join(o.scrapers, ",") != "system:serviceaccount:m:p,system:serviceaccount:m:q" {
		t.Errorf("scrapers %q, %v", o.scrapers, err)
	}
	_, err = parse([]string{"--node-name=a", "--metrics-secure=false", "--metrics-bind-address=127.0.0.1:1", "--metrics-allowed-scrapers=x"}, env())
	if err == nil || !strings.Contains(err.Error(), "--metrics-allowed-scrapers: needs --metrics-secure") {
		t.Errorf("without --metrics-secure: %v", err)
	}
}
