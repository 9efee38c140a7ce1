package agentcmd

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/rest"

	"github.com/nodeaddr/nodeaddr/internal/cmd/cli"
	"github.com/nodeaddr/nodeaddr/internal/kube"
	"github.com/nodeaddr/nodeaddr/metrics"
)

// listenerOptions are the flags of the metrics and probe listeners (docs/metrics.md, "Listeners").
type listenerOptions struct {
	metricsAddr, probeAddr                 string
	metricsSecure                          bool
	tlsCertFile, tlsKeyFile, tokenAudience string
	scrapers                               []string // --metrics-allowed-scrapers, checked by validate
}

func (l *listenerOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&l.metricsAddr, "metrics-bind-address", ":9810", "address for /metrics (0 disables)")
	fs.StringVar(&l.probeAddr, "health-probe-bind-address", "127.0.0.1:9811", "address for /healthz and /readyz (0 disables); loopback, where the kubelet probes with httpGet.host 127.0.0.1")
	fs.BoolVar(&l.metricsSecure, "metrics-secure", true, "serve /metrics over HTTPS to scrapers whose bearer token the API server authenticates (TokenReview) and whose user --metrics-allowed-scrapers lists (that list empty: a SubjectAccessReview for get on /metrics decides); false: plain HTTP for anyone, allowed only on a loopback --metrics-bind-address")
	fs.StringVar(&l.tlsCertFile, "tls-cert-file", "", "PEM serving certificate for /metrics with --metrics-secure (empty: a self-signed one generated at start)")
	fs.StringVar(&l.tlsKeyFile, "tls-private-key-file", "", "PEM private key of --tls-cert-file")
	fs.StringVar(&l.tokenAudience, "metrics-token-audience", "nodeaddr", "audience a scraper's bearer token must be issued for (the TokenReview's spec.audiences): a projected ServiceAccount token with this audience, which the API server itself refuses; empty: the API server's own audiences (a token a compromised agent could replay against the API server)")
	fs.StringSliceVar(&l.scrapers, "metrics-allowed-scrapers", nil, "comma-separated usernames allowed to scrape /metrics, e.g. system:serviceaccount:monitoring:prometheus-k8s: the agent authorizes them itself and sends no SubjectAccessReview (its RBAC can then drop subjectaccessreviews); empty: a SubjectAccessReview for get on /metrics decides")
}

// audiences is the TokenReview's spec.audiences.
func (l *listenerOptions) audiences() []string {
	if l.tokenAudience == "" {
		return nil
	}
	return []string{l.tokenAudience}
}

// validate checks the listener flags.
func (l *listenerOptions) validate() error {
	for _, a := range []struct{ name, v string }{{"metrics-bind-address", l.metricsAddr}, {"health-probe-bind-address", l.probeAddr}} {
		if a.v != "0" && a.v != "" && !strings.Contains(a.v, ":") {
			return cli.Usagef("--%s: %q is not host:port or 0", a.name, a.v)
		}
	}
	metricsAddr := l.metricsAddr
	var err error
	if l.scrapers, err = parseScrapers(l.scrapers); err != nil {
		return err
	}
	if (l.tlsCertFile == "") != (l.tlsKeyFile == "") {
		return cli.Usagef("--tls-cert-file and --tls-private-key-file go together")
	}
	if !metrics.Enabled(metricsAddr) {
		return nil
	}
	if !l.metricsSecure {
		if l.tlsCertFile != "" {
			return cli.Usagef("--tls-cert-file: needs --metrics-secure")
		}
		if len(l.scrapers) > 0 {
			return cli.Usagef("--metrics-allowed-scrapers: needs --metrics-secure (without it /metrics has no scraper check)")
		}
		if !loopbackAddr(metricsAddr) {
			return cli.Usagef("--metrics-secure=false serves /metrics to anyone: --metrics-bind-address %q must be a loopback address (127.0.0.1:PORT or [::1]:PORT)", metricsAddr)
		}
	}
	return nil
}

// loopbackAddr reports whether host:port names a loopback address ("localhost" resolves through
// /etc/hosts, which a hostNetwork pod shares with whoever writes it: not accepted).
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// metricsServer sets up secure metrics on s: the serving certificate and the scraper check
// (reviewer is nil only with --dry-run, whose serve has disabled secure /metrics).
func (l *listenerOptions) metricsServer(nodeName string, reviewer metrics.Reviewer, m *metrics.Metrics, s *metrics.Server) error {
	if !l.metricsSecure || !metrics.Enabled(s.MetricsAddr) {
		return nil
	}
	var err error
	if l.tlsCertFile != "" {
		s.MetricsTLS, err = metrics.FileTLS(l.tlsCertFile, l.tlsKeyFile)
	} else {
		s.MetricsTLS, err = metrics.SelfSignedTLS(nodeName)
	}
	if err != nil {
		return err
	}
	s.MetricsAuth = metrics.NewAuthFilter(metrics.AuthConfig{Reviewer: reviewer, Scrapers: l.scrapers, Logger: s.Logger,
		Registry: m.Registry})
	return nil
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
			return nil, cli.Usagef("--metrics-allowed-scrapers: %q is not a username (want e.g. system:serviceaccount:monitoring:prometheus-k8s)", s)
		case strings.HasPrefix(s, "system:serviceaccount:") && strings.Count(s, ":") != 3:
			return nil, cli.Usagef("--metrics-allowed-scrapers: %q: a ServiceAccount's username is system:serviceaccount:NAMESPACE:NAME", s)
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out, nil
}

// applyDryRunListeners opens no listener under --dry-run unless its flag asks for one: a dry run
// has no kubelet and no API server to check tokens, and often runs where a listener cannot open
// (beside a running agent, or in a fresh network namespace whose loopback is down), so a warning
// about a listener nobody asked for would be noise. One asked for is served, or main warns.
func (l *listenerOptions) applyDryRunListeners(fs *pflag.FlagSet, dryRun bool) {
	if !dryRun {
		return
	}
	if !fs.Changed("health-probe-bind-address") {
		l.probeAddr = "0"
	}
	for _, name := range []string{"metrics-bind-address", "metrics-secure", "tls-cert-file",
		"tls-private-key-file"} {
		if fs.Changed(name) {
			return
		}
	}
	l.metricsAddr = "0"
}

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
