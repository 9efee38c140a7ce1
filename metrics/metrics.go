// Package metrics serves nodeaddr's Prometheus registry and the health and readiness probes, with
// TLS, the scrapers' authentication and authorization, and the listeners' limits. Each stage
// registers its own metrics; this package holds only the collectors that belong to none of them.
package metrics

import (
	"context"
	"net/url"
	"runtime"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	clientmetrics "k8s.io/client-go/tools/metrics"
)

// Metrics is the agent's registry with the collectors that belong to no stage.
type Metrics struct {
	// Registry is where every owner registers its metrics (watcher.NewMetrics and the like).
	Registry *prometheus.Registry

	listenerClosed *prometheus.CounterVec
}

// New returns a registry with the Go and process collectors, nodeaddr_build_info and the listeners'
// counters.
func New(version, revision string) *Metrics {
	r := NewRegistry(prometheus.Labels{"version": version, "revision": revision, "goversion": runtime.Version()})
	m := &Metrics{
		Registry: r,
		listenerClosed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nodeaddr_listener_connections_closed_total",
			Help: "Connections the metrics or probe listener closed to keep serving, by listener and reason (source_budget, listener_full, first_request_timeout).",
		}, []string{"listener", "reason"}),
	}
	r.MustRegister(m.listenerClosed)
	// Pre-create label sets so every series exists from the start (rates and alerts need a 0).
	for _, l := range []string{"metrics", "probes"} {
		for _, r := range []string{closedSourceBudget, closedListenerFull, closedNoRequestSent} {
			m.listenerClosed.WithLabelValues(l, r)
		}
	}
	return m
}

// NewRegistry is a registry with the Go and process collectors and nodeaddr_build_info (value 1)
// with labels: what the agent and the approver both serve.
func NewRegistry(labels prometheus.Labels) *prometheus.Registry {
	r := prometheus.NewRegistry()
	r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "nodeaddr_build_info", Help: "Build information (value 1).",
			ConstLabels: labels}, func() float64 { return 1 }))
	return r
}

// onListenerClose returns the counter of connections listener's budget closed, by reason (a no-op
// without Metrics).
func (m *Metrics) onListenerClose(listener string) func(reason string) {
	if m == nil {
		return func(string) {}
	}
	return func(reason string) { m.listenerClosed.WithLabelValues(listener, reason).Inc() }
}

// Client-go's request metrics, under the names Kubernetes components use, so the same dashboards
// and alerts work; code="<error>" (no HTTP response) tells an unreachable API server apart.
var (
	clientRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rest_client_requests_total",
		Help: "Requests to the Kubernetes API server, by HTTP status code (\"<error>\" when no response was received), method and host.",
	}, []string{"code", "method", "host"})
	clientLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "rest_client_request_duration_seconds",
		Help:    "Latency of requests to the Kubernetes API server, by verb and host (watches: until the response headers).",
		Buckets: []float64{0.005, 0.025, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60},
	}, []string{"verb", "host"})

	installClientHooks sync.Once
)

// RegisterClientMetrics adds client-go's request metrics to m's registry; call it before the first
// request. client-go accepts its hooks once per process, so every Metrics shares the collectors.
func (m *Metrics) RegisterClientMetrics() {
	installClientHooks.Do(func() {
		clientmetrics.Register(clientmetrics.RegisterOpts{
			RequestResult:  clientHooks{},
			RequestLatency: clientHooks{},
		})
	})
	m.Registry.MustRegister(clientRequests, clientLatency)
}

// clientHooks adapt the collectors to client-go's ResultMetric and LatencyMetric.
type clientHooks struct{}

func (clientHooks) Increment(_ context.Context, code, method, host string) {
	clientRequests.WithLabelValues(code, method, host).Inc()
}

// Observe labels only the URL's host: the path carries object names (unbounded cardinality).
func (clientHooks) Observe(_ context.Context, verb string, u url.URL, latency time.Duration) {
	clientLatency.WithLabelValues(verb, u.Host).Observe(latency.Seconds())
}
