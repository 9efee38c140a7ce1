package conflicts

import (
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
)

// Metrics are the detector's collectors, registered by NewMetrics on the registerer it is given.
type Metrics struct {
	addresses, nodes prometheus.Gauge
	writes           *prometheus.CounterVec
	Leader           prometheus.Gauge
}

// NewMetrics registers the detector's metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		addresses: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nodeaddr_conflicts_addresses",
			Help: "Addresses listed by two or more Nodes for longer than the move window (0 on a standby).",
		}),
		nodes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nodeaddr_conflicts_nodes",
			Help: "Nodes marked with the NodeAddressConflict condition: an address another Node lists for longer than the move window, unless this Node, Ready, listed it first by more than the window (0 on a standby).",
		}),
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nodeaddr_conflicts_condition_writes_total",
			Help: "Writes of the NodeAddressConflict condition, by the status written (True: a conflict began or changed; False: it ended).",
		}, []string{"status"}),
		Leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nodeaddr_conflicts_leader",
			Help: "1 while this conflict detector replica holds the leader Lease and decides, 0 on standby.",
		}),
	}
	reg.MustRegister(m.addresses, m.nodes, m.writes, m.Leader)
	for _, s := range []corev1.ConditionStatus{corev1.ConditionTrue, corev1.ConditionFalse} {
		m.writes.WithLabelValues(string(s))
	}
	return m
}
