package main

import (
	"context"
	"fmt"
	"slices"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/nodeaddr/nodeaddr/internal/kube"
	"github.com/nodeaddr/nodeaddr/metrics"
)

// reviewClient asks the API server who a scraper is (TokenReview) and whether it may get /metrics
// (SubjectAccessReview): the two POSTs of a generated clientset's
// AuthenticationV1().TokenReviews().Create and AuthorizationV1().SubjectAccessReviews().Create, on
// REST clients that know only these two types (see internal/kube for why no clientset).
type reviewClient struct {
	authn, authz rest.Interface
	// audiences are the TokenReview's spec.audiences (--metrics-token-audience); empty: the API
	// server's own, so that a token Prometheus sends could be replayed against the API server.
	audiences []string
}

func newReviewClient(cfg *rest.Config, audiences ...string) (*reviewClient, error) {
	s := runtime.NewScheme()
	s.AddKnownTypes(authnv1.SchemeGroupVersion, &authnv1.TokenReview{})
	s.AddKnownTypes(authzv1.SchemeGroupVersion, &authzv1.SubjectAccessReview{})
	metav1.AddToGroupVersion(s, authnv1.SchemeGroupVersion)
	metav1.AddToGroupVersion(s, authzv1.SchemeGroupVersion)
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("review client: %w", err)
	}
	client := func(gv schema.GroupVersion) (rest.Interface, error) { return kube.NewGroupClient(cfg, s, hc, gv) }
	authn, err := client(authnv1.SchemeGroupVersion)
	if err != nil {
		return nil, err
	}
	authz, err := client(authzv1.SchemeGroupVersion)
	if err != nil {
		return nil, err
	}
	return &reviewClient{authn: authn, authz: authz, audiences: audiences}, nil
}

// Authenticate sends a TokenReview for c.audiences: the API server authenticates only a token
// issued for one of them (a projected ServiceAccount token with `audience: nodeaddr`), which it
// refuses in turn when the token is replayed against itself. A token is accepted only if the
// answer names one of the audiences asked for, as client-go's webhook authenticator requires (an
// authenticator that ignores audiences answers none).
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
	switch method {
	case "GET", "HEAD":
		return "get"
	case "POST":
		return "post"
	case "PUT":
		return "put"
	case "PATCH":
		return "patch"
	case "DELETE":
		return "delete"
	}
	return "get"
}
