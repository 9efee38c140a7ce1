package metrics

import (
	"context"
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

// Server serves /metrics on one address and /healthz, /readyz on another (they may be the same).
type Server struct {
	MetricsAddr string // "" or "0" disables /metrics
	ProbeAddr   string // "" or "0" disables the probes
	Metrics     *Metrics
	Healthz     Check
	Readyz      Check
	Logger      *slog.Logger
}

// Listen binds the configured addresses (so a port in use is reported at start) and serves until
// ctx ends.
func (s *Server) Listen(ctx context.Context) (func() error, error) {
	muxes := map[string]*http.ServeMux{}
	mux := func(addr string) *http.ServeMux {
		if m, ok := muxes[addr]; ok {
			return m
		}
		m := http.NewServeMux()
		muxes[addr] = m
		return m
	}
	if enabled(s.MetricsAddr) {
		mux(s.MetricsAddr).Handle("/metrics", promhttp.HandlerFor(s.Metrics.Registry, promhttp.HandlerOpts{}))
	}
	if enabled(s.ProbeAddr) {
		m := mux(s.ProbeAddr)
		m.Handle("/healthz", probe(s.Healthz))
		m.Handle("/readyz", probe(s.Readyz))
	}
	var servers []*http.Server
	var listeners []net.Listener
	for addr, m := range muxes {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			for _, l := range listeners {
				l.Close()
			}
			return nil, fmt.Errorf("listen on %s: %w", addr, err)
		}
		listeners = append(listeners, l)
		servers = append(servers, &http.Server{Handler: m, ReadHeaderTimeout: 5 * time.Second})
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
