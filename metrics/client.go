package metrics

import (
	"context"
	"net/url"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientmetrics "k8s.io/client-go/tools/metrics"
)

// Client-go's request metrics, under the names Kubernetes components use (component-base's
// restclient adapter), so the same dashboards and alerts work. The code label tells an unreachable
// API server (code="<error>": no HTTP response at all) from a refusal (403, 422) or overload (429,
// 5xx).
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

// RegisterClientMetrics adds client-go's request metrics to m's registry and makes every client-go
// REST client of the process report to them. client-go accepts its hooks once per process
// (k8s.io/client-go/tools/metrics.Register), so the collectors are shared by every Metrics that
// registers them; call it before the first request.
func (m *Metrics) RegisterClientMetrics() {
	installClientHooks.Do(func() {
		clientmetrics.Register(clientmetrics.RegisterOpts{
			RequestResult:  requestResult{clientRequests},
			RequestLatency: requestLatency{clientLatency},
		})
	})
	m.Registry.MustRegister(clientRequests, clientLatency)
}

// requestResult adapts a counter to client-go's ResultMetric.
type requestResult struct{ c *prometheus.CounterVec }

func (r requestResult) Increment(_ context.Context, code, method, host string) {
	r.c.WithLabelValues(code, method, host).Inc()
}

// requestLatency adapts a histogram to client-go's LatencyMetric. Only the URL's host becomes a
// label: the path carries object names (unbounded cardinality).
type requestLatency struct{ h *prometheus.HistogramVec }

func (l requestLatency) Observe(_ context.Context, verb string, u url.URL, latency time.Duration) {
	l.h.WithLabelValues(verb, u.Host).Observe(latency.Seconds())
}
