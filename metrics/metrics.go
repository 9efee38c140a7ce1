// Package metrics serves nodeaddr's Prometheus registry and the health and readiness probes, with
// TLS, the scrapers' authentication and authorization, and the listeners' limits. Each stage
// registers its own metrics; this package holds only the collectors that belong to none of them.
package metrics

import (
	"runtime"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Metrics is the agent's registry with the collectors that belong to no stage.
type Metrics struct {
	// Registry is where every owner registers its metrics (watcher.NewMetrics and the like).
	Registry *prometheus.Registry

	state          *stateCollector
	listenerClosed *prometheus.CounterVec
}

// New returns a registry with the Go and process collectors, nodeaddr_build_info, the Node state
// gauges and the listeners' counters.
func New(version, revision string) *Metrics {
	r := prometheus.NewRegistry()
	m := &Metrics{
		Registry: r,
		state:    newStateCollector(),
		listenerClosed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nodeaddr_listener_connections_closed_total",
			Help: "Connections the metrics or probe listener closed to keep serving, by listener and reason (source_budget, listener_full, first_request_timeout).",
		}, []string{"listener", "reason"}),
	}
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "nodeaddr_build_info",
		Help: "Build information (value 1).",
	}, []string{"version", "revision", "goversion"})
	build.WithLabelValues(version, revision, runtime.Version()).Set(1)
	r.MustRegister(m.state, build, m.listenerClosed,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Pre-create label sets so every series exists from the start (rates and alerts need a 0).
	for _, l := range []string{"metrics", "probes"} {
		for _, r := range []string{closedSourceBudget, closedListenerFull, closedNoRequestSent} {
			m.listenerClosed.WithLabelValues(l, r)
		}
	}
	return m
}

// onListenerClose returns the counter of connections listener's budget closed, by reason (a no-op
// without Metrics).
func (m *Metrics) onListenerClose(listener string) func(reason string) {
	if m == nil {
		return func(string) {}
	}
	return func(reason string) { m.listenerClosed.WithLabelValues(listener, reason).Inc() }
}
