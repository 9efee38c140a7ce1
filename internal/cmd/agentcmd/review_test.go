package agentcmd

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	"k8s.io/client-go/rest"

	"github.com/nodeaddr/nodeaddr/metrics"
)

// The review client sends what the API server expects: a TokenReview with the token, then a
// SubjectAccessReview for the non-resource get /metrics with the reviewed user's identity.
func TestReviewClientRequests(t *testing.T) {
	var sar authzv1.SubjectAccessReview
	var wantAudiences atomic.Value // read by the handler
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/apis/authentication.k8s.io/v1/tokenreviews":
			var tr authnv1.TokenReview
			if err := json.NewDecoder(r.Body).Decode(&tr); err != nil || r.Method != "POST" {
				t.Errorf("tokenreview: %s %v", r.Method, err)
			}
			tr.Status.Authenticated = tr.Spec.Token == "good" || tr.Spec.Token == "no-audience"
			if tr.Spec.Token == "good" {
				tr.Status.Audiences = tr.Spec.Audiences
			}
			if got, want := fmt.Sprint(tr.Spec.Audiences), wantAudiences.Load(); got != want {
				t.Errorf("TokenReview audiences %s, want %s", got, want)
			}
			if tr.Status.Authenticated {
				tr.Status.User = authnv1.UserInfo{Username: "system:serviceaccount:monitoring:prometheus", UID: "u1",
					Groups: []string{"system:serviceaccounts"}, Extra: map[string]authnv1.ExtraValue{"k": {"v"}}}
			}
			tr.APIVersion, tr.Kind = "authentication.k8s.io/v1", "TokenReview"
			_ = json.NewEncoder(w).Encode(tr)
		case "/apis/authorization.k8s.io/v1/subjectaccessreviews":
			if err := json.NewDecoder(r.Body).Decode(&sar); err != nil || r.Method != "POST" {
				t.Errorf("subjectaccessreview: %s %v", r.Method, err)
			}
			sar.Status.Allowed = true
			sar.APIVersion, sar.Kind = "authorization.k8s.io/v1", "SubjectAccessReview"
			_ = json.NewEncoder(w).Encode(sar)
		default:
			t.Errorf("unexpected request %s %s", r.Method, r.URL.Path)
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	wantAudiences.Store("[]")
	noAudience, err := newReviewClient(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, ok, err := noAudience.Authenticate(ctx, "no-audience"); !ok || err != nil {
		t.Fatalf("without an audience: ok %v err %v", ok, err)
	}
	wantAudiences.Store("[nodeaddr]")
	c, err := newReviewClient(&rest.Config{Host: srv.URL}, "nodeaddr")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := c.Authenticate(ctx, "bad"); ok || err != nil {
		t.Fatalf("bad token: ok %v err %v", ok, err)
	}
	// An authenticator that ignores the audiences asked for answers none: refused.
	if _, ok, err := c.Authenticate(ctx, "no-audience"); ok || err != nil {
		t.Fatalf("authenticated without the audience: ok %v err %v", ok, err)
	}
	u, ok, err := c.Authenticate(ctx, "good")
	if !ok || err != nil || u.Name != "system:serviceaccount:monitoring:prometheus" || u.UID != "u1" || u.Extra["k"][0] != "v" {
		t.Fatalf("good token: %+v %v %v", u, ok, err)
	}
	allowed, err := c.Authorize(ctx, u, http.MethodGet, "/metrics")
	if !allowed || err != nil {
		t.Fatalf("authorize: %v %v", allowed, err)
	}
	s := sar.Spec
	if s.User != u.Name || s.UID != "u1" || len(s.Groups) != 1 || s.Extra["k"][0] != "v" || s.ResourceAttributes != nil ||
		s.NonResourceAttributes == nil || *s.NonResourceAttributes != (authzv1.NonResourceAttributes{Verb: "get", Path: "/metrics"}) {
		t.Errorf("SubjectAccessReview spec: %+v", s)
	}
	var _ metrics.Reviewer = c
}
