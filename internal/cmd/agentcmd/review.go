package agentcmd

// The scrapers' TokenReviews and SubjectAccessReviews, sent for the metrics listener.

import (
	"context"
	"fmt"
	"slices"
	"strings"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/rest"

	"github.com/nodeaddr/nodeaddr/internal/kube"
	"github.com/nodeaddr/nodeaddr/metrics"
)

// reviewClient sends TokenReviews and SubjectAccessReviews, the two POSTs of a clientset's Create,
// on REST clients that know only these two groups (see internal/kube for why no clientset).
type reviewClient struct {
	authn, authz rest.Interface
	// audiences are the TokenReview's (--metrics-token-audience); empty: the API server's own, so
	// that a token Prometheus sends could be replayed against the API server.
	audiences []string
}

func newReviewClient(cfg *rest.Config, audiences ...string) (*reviewClient, error) {
	s := runtime.NewScheme()
	utilruntime.Must(authnv1.AddToScheme(s))
	utilruntime.Must(authzv1.AddToScheme(s))
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("review client: %w", err)
	}
	c := &reviewClient{audiences: audiences}
	if c.authn, err = kube.NewGroupClient(cfg, s, hc, authnv1.SchemeGroupVersion); err != nil {
		return nil, err
	}
	if c.authz, err = kube.NewGroupClient(cfg, s, hc, authzv1.SchemeGroupVersion); err != nil {
		return nil, err
	}
	return c, nil
}

// Authenticate sends a TokenReview for c.audiences, so that the API server accepts only a token
// issued for them (which it refuses when replayed against itself). The answer must name one of
// them, as client-go's webhook authenticator requires (an authenticator ignoring audiences names none).
func (c *reviewClient) Authenticate(ctx context.Context, token string) (metrics.User, bool, error) {
	in := &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token, Audiences: c.audiences}}
	out := &authnv1.TokenReview{}
	if err := c.authn.Post().Resource("tokenreviews").Body(in).Do(ctx).Into(out); err != nil {
		return metrics.User{}, false, fmt.Errorf("tokenreview: %w", err)
	}
	if !out.Status.Authenticated {
		return metrics.User{}, false, nil
	}
	if len(c.audiences) > 0 && !slices.ContainsFunc(out.Status.Audiences, func(a string) bool { return slices.Contains(c.audiences, a) }) {
		return metrics.User{}, false, nil
	}
	u := out.Status.User
	extra := map[string][]string{}
	for k, v := range u.Extra {
		extra[k] = v
	}
	return metrics.User{Name: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra}, true, nil
}

// Authorize sends a SubjectAccessReview for a non-resource request.
func (c *reviewClient) Authorize(ctx context.Context, u metrics.User, verb, path string) (bool, error) {
	extra := map[string]authzv1.ExtraValue{}
	for k, v := range u.Extra {
		extra[k] = v
	}
	in := &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		User: u.Name, UID: u.UID, Groups: u.Groups, Extra: extra,
		NonResourceAttributes: &authzv1.NonResourceAttributes{Verb: verbOf(verb), Path: path},
	}}
	out := &authzv1.SubjectAccessReview{}
	if err := c.authz.Post().Resource("subjectaccessreviews").Body(in).Do(ctx).Into(out); err != nil {
		return false, fmt.Errorf("subjectaccessreview: %w", err)
	}
	return out.Status.Allowed, nil
}

// verbOf maps an HTTP method to the verb of a non-resource request, as the API server's
// request-info resolver does (GET and HEAD are get).
func verbOf(method string) string {
	if slices.Contains([]string{"POST", "PUT", "PATCH", "DELETE"}, method) {
		return strings.ToLower(method)
	}
	return "get"
}
