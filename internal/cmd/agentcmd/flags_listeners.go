package agentcmd

import (
	"net"
	"net/netip"
	"slices"
	"strings"

	"github.com/nodeaddr/nodeaddr/internal/cmd/cli"
	"github.com/nodeaddr/nodeaddr/metrics"
	"github.com/spf13/pflag"
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
