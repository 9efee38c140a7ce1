package csrapproval

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodeaddr/nodeaddr/internal/csrapproval/rules"
)

// Metrics are the approver's collectors, registered by NewMetrics on the registerer it is given.
type Metrics struct {
	pendingTotal  *prometheus.CounterVec
	approvedTotal prometheus.Counter
	latency       prometheus.Histogram
	Leader        prometheus.Gauge
}

// NewMetrics registers the approver's metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		pendingTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nodeaddr_csr_pending_total",
			Help: "Kubelet-serving CSRs left pending by the approver (once per CSR and reason), by the rule they break.",
		}, []string{"reason"}),
		approvedTotal: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nodeaddr_csr_approved_total",
			Help: "Kubelet-serving CSRs the approver approved.",
		}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "nodeaddr_csr_approval_seconds",
			Help:    "Time from a kubelet-serving CSR's creation to its approval (whole seconds: creationTimestamp has no finer resolution).",
			Buckets: []float64{0.5, 1, 2, 3, 5, 10, 30, 60, 300},
		}),
		Leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nodeaddr_approver_leader",
			Help: "1 while this approver replica holds the leader Lease and decides, 0 on standby.",
		}),
	}
	reg.MustRegister(m.pendingTotal, m.approvedTotal, m.latency, m.Leader)
	for _, r := range rules.Reasons() {
		m.pendingTotal.WithLabelValues(r)
	}
	return m
}
