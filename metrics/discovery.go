package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodeaddr/nodeaddr/resolver"
	"github.com/nodeaddr/nodeaddr/resolver/discovery"
)

// discoveryMetrics observe external-address discovery (--external-ip-discovery).
type discoveryMetrics struct {
	probes      *prometheus.CounterVec
	rounds      *prometheus.CounterVec
	lastSuccess *prometheus.GaugeVec
	latency     prometheus.Histogram
}

func newDiscoveryMetrics() discoveryMetrics {
	return discoveryMetrics{
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
}

func (d discoveryMetrics) collectors() []prometheus.Collector {
	// Every family and result exists from the start, so the discovery alert's rate has a 0.
	for _, f := range []resolver.Family{resolver.IPv4, resolver.IPv6} {
		for _, o := range discovery.Outcomes() {
			d.rounds.WithLabelValues(f.String(), string(o))
		}
	}
	return []prometheus.Collector{d.probes, d.rounds, d.lastSuccess, d.latency}
}

// OnDiscoveryServers creates the probe series of each configured server.
func (m *Metrics) OnDiscoveryServers(servers []string) {
	for _, s := range servers {
		for _, r := range discovery.ProbeResults() {
			m.discovery.probes.WithLabelValues(s, r)
		}
	}
}

// OnProbe counts a STUN Binding request and observes its latency.
func (m *Metrics) OnProbe(server, result string, d time.Duration) {
	m.discovery.probes.WithLabelValues(server, result).Inc()
	m.discovery.latency.Observe(d.Seconds())
}

// OnRound counts a discovery round; an agreed one sets the family's last success time.
func (m *Metrics) OnRound(f resolver.Family, o discovery.Outcome, at time.Time) {
	m.discovery.rounds.WithLabelValues(f.String(), string(o)).Inc()
	if o == discovery.Agreed {
		m.discovery.lastSuccess.WithLabelValues(f.String()).Set(float64(at.UnixNano()) / 1e9)
	}
}
