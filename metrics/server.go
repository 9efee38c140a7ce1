package metrics

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Check returns nil when healthy, else why not.
type Check func() error

// Server serves /metrics on one address and /healthz, /readyz on another. Both listen on the host
// network of a hostNetwork pod, so both have the limits of Limits; /metrics is served over TLS to
// authorized scrapers only when MetricsTLS and MetricsAuth are set.
type Server struct {
	MetricsAddr string // "" or "0" disables /metrics
	ProbeAddr   string // "" or "0" disables the probes
	Metrics     *Metrics
	Healthz     Check
	Readyz      Check
	Logger      *slog.Logger
	// MetricsTLS serves /metrics over HTTPS (nil: plain HTTP).
	MetricsTLS *tls.Config
	// MetricsAuth admits only authenticated, authorized scrapers to /metrics (nil: everyone).
	MetricsAuth *AuthFilter
	// Limits of both servers; the zero value means defaultLimits.
	Limits Limits
}

// Limits bound what one client can make a server hold: time, header memory and connections.
type Limits struct {
	ReadHeaderTimeout time.Duration // also bounds the TLS handshake
	ReadTimeout       time.Duration
	WriteTimeout      time.Duration
	IdleTimeout       time.Duration
	// MaxHeaderBytes: a request whose header is larger gets 431 (net/http reads at most this plus
	// 4 KiB of slack before refusing).
	MaxHeaderBytes int
	// MaxConns is the number of open connections per listener; more wait in the kernel's backlog.
	MaxConns int
}

// defaultLimits fit a scrape every 30 s (Prometheus keeps its connection open between scrapes:
// IdleTimeout is longer than the interval) and a kubelet probe every 5 s; 16 connections leave room for
// a Prometheus pair and a few probes while bounding what a flood of refused requests holds (each
// stays open for net/http's 500 ms linger after a 431).
var defaultLimits = Limits{
	ReadHeaderTimeout: 5 * time.Second,
	ReadTimeout:       10 * time.Second,
	WriteTimeout:      15 * time.Second,
	IdleTimeout:       90 * time.Second,
	MaxHeaderBytes:    8 << 10,
	MaxConns:          16,
}

// Listen binds the configured addresses (so a port in use is reported at start) and serves until
// ctx ends.
func (s *Server) Listen(ctx context.Context) (func() error, error) {
	lim := s.Limits
	if lim == (Limits{}) {
		lim = defaultLimits
	}
	log := s.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
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
		l = limitListen(l, lim.MaxConns)
		if ep.tls != nil {
			l = tls.NewListener(l, ep.tls)
		}
		listeners = append(listeners, l)
		servers = append(servers, &http.Server{
			Handler:           ep.mux,
			ReadHeaderTimeout: lim.ReadHeaderTimeout,
			ReadTimeout:       lim.ReadTimeout,
			WriteTimeout:      lim.WriteTimeout,
			IdleTimeout:       lim.IdleTimeout,
			MaxHeaderBytes:    lim.MaxHeaderBytes,
			// TLS handshake errors from port scanners are not worth more than a debug line.
			ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug),
		})
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

// endpoint is one listener's address, routes and TLS.
type endpoint struct {
	addr string
	mux  *http.ServeMux
	tls  *tls.Config
}

// endpoints lays out the routes: /metrics on MetricsAddr, the probes on ProbeAddr, and all three
// on one plain-HTTP listener when the two addresses are the same.
func (s *Server) endpoints() ([]endpoint, error) {
	var eps []endpoint
	if enabled(s.MetricsAddr) {
		h := promhttp.HandlerFor(s.Metrics.Registry, handlerOpts)
		if s.MetricsAuth != nil {
			h = s.MetricsAuth.Wrap(h)
		}
		m := http.NewServeMux()
		m.Handle("GET /metrics", h) // HEAD too; the review asks for get
		eps = append(eps, endpoint{s.MetricsAddr, m, s.MetricsTLS})
	}
	if enabled(s.ProbeAddr) {
		m := http.NewServeMux()
		m.Handle("/healthz", probe(s.Healthz))
		m.Handle("/readyz", probe(s.Readyz))
		if len(eps) == 1 && eps[0].addr == s.ProbeAddr {
			if s.MetricsTLS != nil || s.MetricsAuth != nil {
				return nil, fmt.Errorf("the probes and secure metrics cannot share %s: the kubelet probes plain HTTP", s.ProbeAddr)
			}
			m.Handle("/metrics", promhttp.HandlerFor(s.Metrics.Registry, handlerOpts))
			eps = eps[:0]
		}
		eps = append(eps, endpoint{s.ProbeAddr, m, nil})
	}
	return eps, nil
}

// handlerOpts: no compression. The exposition is about 12 KB; a gzip writer allocates about 800 KiB
// of compressor state, which the agent's anonymous memory (about 4 MiB idle) shows.
var handlerOpts = promhttp.HandlerOpts{DisableCompression: true}

func enabled(addr string) bool { return addr != "" && addr != "0" }

func probe(c Check) http.Handler {
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

// limitListen returns a listener that keeps at most n connections open: while n are open it stops
// accepting, and further clients wait in the kernel's backlog, costing the agent nothing
// (golang.org/x/net/netutil.LimitListener does the same; it is not a dependency here). n <= 0 means
// no limit.
func limitListen(l net.Listener, n int) net.Listener {
	if n <= 0 {
		return l
	}
	return &limitListener{Listener: l, sem: make(chan struct{}, n), done: make(chan struct{})}
}

type limitListener struct {
	net.Listener
	sem       chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	waits     atomic.Int64 // times Accept found every slot taken (tests)
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
	default:
		l.waits.Add(1)
		select {
		case l.sem <- struct{}{}:
		case <-l.done:
			return nil, net.ErrClosed
		}
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &limitConn{Conn: c, release: sync.OnceFunc(func() { <-l.sem })}, nil
}

func (l *limitListener) Close() error {
	err := l.Listener.Close()
	l.closeOnce.Do(func() { close(l.done) })
	return err
}

type limitConn struct {
	net.Conn
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.release()
	return err
}

// CloseWrite lets net/http half-close a connection it refuses (431), as it does on a bare TCPConn.
func (c *limitConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
