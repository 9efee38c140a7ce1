package publisher

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the publisher's collectors (NewMetrics); a nil *Metrics records nothing.
type Metrics struct {
	writes         *prometheus.CounterVec
	reaction       prometheus.Histogram
	overwrites     prometheus.Counter
	overwriteDelay prometheus.Gauge
	nodeIPMissing  prometheus.Gauge
}

// NewMetrics registers the publisher's metrics on reg, every write kind and result at 0.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nodeaddr_node_writes_total",
			Help: "Writes to the Node, by kind (addresses, annotations, taint) and result (success, conflict, error).",
		}, []string{"kind", "result"}),
		reaction: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "nodeaddr_reaction_seconds",
			Help:    "Time from the first kernel event of a burst to the accepted write of the resulting addresses.",
			Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 1, 2, 5, 10, 30},
		}),
		overwrites: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nodeaddr_overwrites_total",
			Help: "Times another writer replaced the addresses nodeaddr had written.",
		}),
		overwriteDelay: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nodeaddr_overwrite_backoff_seconds",
			Help: "Current delay before rewriting addresses another writer keeps reverting (0: not fighting).",
		}),
		nodeIPMissing: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nodeaddr_provided_node_ip_missing",
			Help: "1 while the kubelet's alpha.kubernetes.io/provided-node-ip is not assigned to the host (the Node stays tainted).",
		}),
	}
	reg.MustRegister(m.writes, m.reaction, m.overwrites, m.overwriteDelay, m.nodeIPMissing)
	for _, k := range WriteKinds() {
		for _, r := range WriteResults() {
			m.writes.WithLabelValues(k, r)
		}
	}
	return m
}

func (m *Metrics) write(kind, result string) {
	if m != nil {
		m.writes.WithLabelValues(kind, result).Inc()
	}
}

func (m *Metrics) reacted(d time.Duration) {
	if m != nil {
		m.reaction.Observe(d.Seconds())
	}
}

// overwritten counts an overwrite and sets the current delay before the rewrite.
func (m *Metrics) overwritten(delay time.Duration) {
	if m != nil {
		m.overwrites.Inc()
		m.overwriteDelay.Set(delay.Seconds())
	}
}

func (m *Metrics) providedNodeIP(missing bool) {
	if m == nil {
		return
	}
	v := 0.0
	if missing {
		v = 1
	}
	m.nodeIPMissing.Set(v)
}
