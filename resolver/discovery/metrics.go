package discovery

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodeaddr/nodeaddr/resolver"
)

// Metrics are discovery's collectors (NewMetrics); a nil *Metrics records nothing.
type Metrics struct {
	probes      *prometheus.CounterVec
	rounds      *prometheus.CounterVec
	lastSuccess *prometheus.GaugeVec
	latency     prometheus.Histogram
}

// NewMetrics registers discovery's metrics on reg, every family and outcome at 0 for the alerts.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		probes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nodeaddr_discovery_probes_total",
			Help: "STUN Binding requests sent for external-address discovery, by server and result (success, timeout, error).",
		}, []string{"server", "result"}),
		rounds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nodeaddr_discovery_rounds_total",
			Help: "External-address discovery rounds (one request to each server), by family and result (agreed, disagreement, no_majority, no_answer).",
		}, []string{"family", "result"}),
		lastSuccess: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "nodeaddr_discovery_last_success_timestamp_seconds",
			Help: "Unix time of the last discovery round in which a majority of the STUN servers agreed, by family.",
		}, []string{"family"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "nodeaddr_discovery_probe_duration_seconds",
			Help:    "Time from a STUN Binding request to its response (or to the probe's timeout).",
			Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5},
		}),
	}
	reg.MustRegister(m.probes, m.rounds, m.lastSuccess, m.latency)
	for _, f := range families {
		for _, o := range Outcomes() {
			m.rounds.WithLabelValues(f.String(), string(o))
		}
	}
	return m
}

// servers creates the probe series of each configured server.
func (m *Metrics) servers(servers []Server) {
	if m == nil {
		return
	}
	for _, s := range servers {
		for _, r := range ProbeResults() {
			m.probes.WithLabelValues(s.String(), r)
		}
	}
}

// probe counts one Binding request and observes its latency.
func (m *Metrics) probe(server, result string, d time.Duration) {
	if m != nil {
		m.probes.WithLabelValues(server, result).Inc()
		m.latency.Observe(d.Seconds())
	}
}

// round counts one round of probes for family f; an agreed one sets the family's last success time.
func (m *Metrics) round(f resolver.Family, o Outcome, at time.Time) {
	if m == nil {
		return
	}
	m.rounds.WithLabelValues(f.String(), string(o)).Inc()
	if o == Agreed {
		m.lastSuccess.WithLabelValues(f.String()).Set(float64(at.UnixNano()) / 1e9)
	}
}
