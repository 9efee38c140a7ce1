package metrics

import (
	"context"
	"net/url"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientmetrics "k8s.io/client-go/tools/metrics"
)

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
