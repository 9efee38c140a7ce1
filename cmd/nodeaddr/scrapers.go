package main

import (
	"context"
	"slices"
	"strings"

	"github.com/nodeaddr/nodeaddr/metrics"
)

// allowListReviewer authenticates a scraper's token with the API server (TokenReview, audience
// bound) and authorizes the user it names against --metrics-allowed-scrapers, a list of
// usernames, without asking the API server: the agent then needs no `create` on
// subjectaccessreviews, which no admission policy can narrow (docs/security.md, "Listeners and scraper
// credentials").
type allowListReviewer struct {
	metrics.Reviewer
	users []string
}

// Authorize allows exactly the listed usernames, for the one request the filter checks.
func (r allowListReviewer) Authorize(_ context.Context, u metrics.User, _, _ string) (bool, error) {
	return scraperAllowed(r.users, u.Name), nil
}

// AuthorizesLocally tells the metrics filter that Authorize sends no SubjectAccessReview.
func (allowListReviewer) AuthorizesLocally() bool { return true }

// scraperAllowed reports whether user is one of the listed usernames (exact, case-sensitive, as
// the API server's usernames are).
func scraperAllowed(users []string, user string) bool {
	return user != "" && slices.Contains(users, user)
}

// parseScrapers checks --metrics-allowed-scrapers: comma-separated usernames as a TokenReview
// returns them, e.g. system:serviceaccount:monitoring:prometheus-k8s. Empty entries (a trailing
// comma, an unset ConfigMap key) are dropped; an empty list keeps SubjectAccessReviews.
func parseScrapers(in []string) ([]string, error) {
	var out []string
	for _, s := range in {
		s = strings.TrimSpace(s)
		switch {
		case s == "":
			continue
		case strings.ContainsAny(s, " \t\n/"):
			return nil, usagef("--metrics-allowed-scrapers: %q is not a username (want e.g. system:serviceaccount:monitoring:prometheus-k8s)", s)
		case strings.HasPrefix(s, "system:serviceaccount:") && strings.Count(s, ":") != 3:
			return nil, usagef("--metrics-allowed-scrapers: %q: a ServiceAccount's username is system:serviceaccount:NAMESPACE:NAME", s)
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out, nil
}

// withScrapers wraps reviewer when an allow-list is configured.
func withScrapers(reviewer metrics.Reviewer, users []string) metrics.Reviewer {
	if reviewer == nil || len(users) == 0 {
		return reviewer
	}
	return allowListReviewer{Reviewer: reviewer, users: users}
}
