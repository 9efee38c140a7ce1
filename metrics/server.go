package metrics

import (
	"cmp"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Check returns nil when healthy, else why not.
type Check func() error

// Server serves /metrics on one address and /healthz, /readyz on another, both on the host network
// and so under Limits.
type Server struct {
	MetricsAddr, ProbeAddr string // "" or "0" disables one
	Metrics                *Metrics
	Healthz, Readyz        Check
	Logger                 *slog.Logger
	// MetricsTLS serves /metrics over HTTPS (nil: plain HTTP).
	MetricsTLS *tls.Config
	// MetricsAuth admits only authenticated, authorized scrapers to /metrics (nil: everyone).
	MetricsAuth *AuthFilter
	Limits      Limits // the zero value means defaultLimits
}

// Limits bound what one client can make a server hold: time, header memory and connections.
type Limits struct {
	// ReadHeaderTimeout bounds the TLS handshake, then each request header from its first byte.
	ReadHeaderTimeout time.Duration
	// FirstRequestTimeout closes a connection without a complete first request header (TLS
	// handshake included) this long after it was accepted.
	FirstRequestTimeout                    time.Duration
	ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	// MaxHeaderBytes: a larger request header gets 431 (net/http reads 4 KiB more before refusing).
	MaxHeaderBytes int
	// MaxConns is the connections per listener handed to net/http (they have sent something),
	// MaxSilentConns those that have not (each costs a small goroutine), MaxConnsPerSource what one
	// source (IPv4 address, IPv6 /64) may hold of both: see connBudget.
	MaxConns, MaxSilentConns, MaxConnsPerSource int
}

// defaultLimits fit a scrape every 30 s (Prometheus keeps its connection open between scrapes:
// IdleTimeout is longer than the interval) and a kubelet probe every few seconds (a new connection
// per probe, its request sent at once). A client that connects and sends nothing, or sends its
// header byte by byte, is closed after 2 s; one source holds at most 4 connections.
var defaultLimits = Limits{
	ReadHeaderTimeout:   2 * time.Second,
	FirstRequestTimeout: 2 * time.Second,
	ReadTimeout:         10 * time.Second,
	WriteTimeout:        15 * time.Second,
	IdleTimeout:         90 * time.Second,
	MaxHeaderBytes:      8 << 10,
	MaxConns:            16,
	MaxSilentConns:      64,
	MaxConnsPerSource:   4,
}

// Listen binds the addresses (so a port in use is reported at start); the returned func serves
// until ctx ends.
func (s *Server) Listen(ctx context.Context) (func() error, error) {
	lim := cmp.Or(s.Limits, defaultLimits)
	log := cmp.Or(s.Logger, slog.New(slog.DiscardHandler))
	eps, err := s.endpoints()
	if err != nil {
		return nil, err
	}
	var servers []*http.Server
	var listeners []net.Listener
	for _, ep := range eps {
		l, err := net.Listen("tcp", ep.addr)
		if err != nil {
			for _, l := range listeners {
				l.Close()
			}
			return nil, fmt.Errorf("listen on %s: %w", ep.addr, err)
		}
		perSource := lim.MaxConnsPerSource
		if ep.name == "probes" {
			perSource = 0 // the whole listener: on loopback every neighbour is the kubelet's source
		}
		budget := newConnBudget(l, lim.MaxConns, lim.MaxSilentConns, perSource, lim.FirstRequestTimeout,
			s.Metrics.onListenerClose(ep.name))
		l = budget
		if ep.tls != nil {
			l = tls.NewListener(l, ep.tls)
		}
		listeners = append(listeners, l)
		srv := lim.server(ep.mux)
		srv.ConnState = budget.connState
		// TLS handshake errors from port scanners are not worth more than a debug line.
		srv.ErrorLog = slog.NewLogLogger(log.Handler(), slog.LevelDebug)
		// The kubelet opens a connection per probe: one left open is only a neighbour's to hold.
		srv.SetKeepAlivesEnabled(ep.keepAlive)
		servers = append(servers, srv)
	}
	errc := make(chan error, len(servers))
	for i, srv := range servers {
		go func() { errc <- srv.Serve(listeners[i]) }()
	}
	wait := func() error {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		for _, srv := range servers {
			_ = srv.Shutdown(sctx) // best effort: the process is stopping
		}
		var errs []error
		for range servers {
			if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	}
	return wait, nil
}

// NewHTTPServer is an http.Server for h with the default limits' timeouts and header size.
func NewHTTPServer(h http.Handler) *http.Server { return defaultLimits.server(h) }

func (l Limits) server(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: l.ReadHeaderTimeout, ReadTimeout: l.ReadTimeout,
		WriteTimeout: l.WriteTimeout, IdleTimeout: l.IdleTimeout, MaxHeaderBytes: l.MaxHeaderBytes}
}

// endpoint is one listener's address, routes and TLS.
type endpoint struct {
	name      string // listener label: metrics or probes
	addr      string
	mux       *http.ServeMux
	tls       *tls.Config
	keepAlive bool
}

// endpoints lays out the routes: /metrics on MetricsAddr, the probes on ProbeAddr, and all three
// on one plain-HTTP listener when the two addresses are the same.
func (s *Server) endpoints() ([]endpoint, error) {
	var eps []endpoint
	if Enabled(s.MetricsAddr) {
		h := promhttp.HandlerFor(s.Metrics.Registry, handlerOpts)
		if s.MetricsAuth != nil {
			h = s.MetricsAuth.Wrap(h)
		}
		m := http.NewServeMux()
		m.Handle("GET /metrics", h) // HEAD too; the review asks for get
		eps = append(eps, endpoint{name: "metrics", addr: s.MetricsAddr, mux: m, tls: s.MetricsTLS, keepAlive: true})
	}
	if Enabled(s.ProbeAddr) {
		m := http.NewServeMux()
		m.Handle("/healthz", Probe(s.Healthz))
		m.Handle("/readyz", Probe(s.Readyz))
		shared := len(eps) == 1 && eps[0].addr == s.ProbeAddr
		if shared {
			if s.MetricsTLS != nil || s.MetricsAuth != nil {
				return nil, fmt.Errorf("the probes and secure metrics cannot share %s: the kubelet probes plain HTTP", s.ProbeAddr)
			}
			m.Handle("/metrics", promhttp.HandlerFor(s.Metrics.Registry, handlerOpts))
			eps = eps[:0]
		}
		eps = append(eps, endpoint{name: "probes", addr: s.ProbeAddr, mux: m, keepAlive: shared})
	}
	return eps, nil
}

// handlerOpts: no compression. The exposition is about 12 KB; a gzip writer allocates about 800 KiB
// of compressor state, which the agent's anonymous memory (about 4 MiB idle) shows.
var handlerOpts = promhttp.HandlerOpts{DisableCompression: true}

// Enabled reports whether a listener address is set: "" and "0" disable it.
func Enabled(addr string) bool { return addr != "" && addr != "0" }

// Probe answers "ok" when c (nil: none) passes, else 503 with its error.
func Probe(c Check) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if c != nil {
			if err := c(); err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		fmt.Fprintln(w, "ok")
	})
}

// SelfSignedTLS returns a TLS configuration with a fresh self-signed certificate for hosts plus
// localhost, valid for a year; the key never leaves memory. Scrapers skip verification and rely on
// the bearer token check, as for the kubelet's self-signed serving certificate.
func SelfSignedTLS(hosts ...string) (*tls.Config, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate key: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{ // no SerialNumber: CreateCertificate draws a random one
		Subject:               pkix.Name{CommonName: "nodeaddr"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("self-sign certificate: %w", err)
	}
	return serverTLS(tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}), nil
}

// FileTLS loads a serving certificate and key (PEM). They are read once, at start.
func FileTLS(certFile, keyFile string) (*tls.Config, error) {
	c, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("load TLS certificate: %w", err)
	}
	return serverTLS(c), nil
}

func serverTLS(c tls.Certificate) *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{c}, MinVersion: tls.VersionTLS12}
}
