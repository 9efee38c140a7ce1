package main

import (
	"errors"
	"github.com/spf13/pflag"
	"net"
	"net/netip"

	"github.com/nodeaddr/nodeaddr/metrics"
)

// listenerOptions are the flags of the metrics and probe listeners (docs/metrics.md, "Listeners").
type listenerOptions struct {
	metricsSecure bool
	tlsCertFile   string
	tlsKeyFile    string
	tokenAudience string
	// scrapers is --metrics-allowed-scrapers, checked by validate (parseScrapers).
	scrapers []string
}

func (l *listenerOptions) addFlags(fs *pflag.FlagSet) {
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

// validate checks the listener flags once the addresses are known.
func (l *listenerOptions) validate(metricsAddr string) error {
	var err error
	if l.scrapers, err = parseScrapers(l.scrapers); err != nil {
		return err
	}
	if (l.tlsCertFile == "") != (l.tlsKeyFile == "") {
		return usagef("--tls-cert-file and --tls-private-key-file go together")
	}
	if !enabledAddr(metricsAddr) {
		return nil
	}
	if !l.metricsSecure {
		if l.tlsCertFile != "" {
			return usagef("--tls-cert-file: needs --metrics-secure")
		}
		if len(l.scrapers) > 0 {
			return usagef("--metrics-allowed-scrapers: needs --metrics-secure (without it /metrics has no scraper check)")
		}
		if !loopbackAddr(metricsAddr) {
			return usagef("--metrics-secure=false serves /metrics to anyone: --metrics-bind-address %q must be a loopback address (127.0.0.1:PORT or [::1]:PORT)", metricsAddr)
		}
	}
	return nil
}

func enabledAddr(addr string) bool { return addr != "" && addr != "0" }

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

// metricsServer sets up secure metrics on s: the serving certificate and the scraper check.
func (l *listenerOptions) metricsServer(nodeName string, reviewer metrics.Reviewer, m *metrics.Metrics, s *metrics.Server) error {
	if !l.metricsSecure || !enabledAddr(s.MetricsAddr) {
		return nil
	}
	if reviewer == nil {
		return errors.New("--metrics-secure needs the API server to check scrapers' tokens (not available with --dry-run): set --metrics-secure=false with a loopback --metrics-bind-address, or --metrics-bind-address=0")
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
	s.MetricsAuth = metrics.NewAuthFilter(metrics.AuthConfig{Reviewer: reviewer, Logger: s.Logger, Registry: m.Registry})
	return nil
}
