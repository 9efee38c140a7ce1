package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodeaddr/nodeaddr/internal/csrapproval"
)

// csrMetrics observe the kubelet-serving CSR approver (--approve-kubelet-serving-csr). They are
// registered only with the flag on: an agent that approves nothing exposes none of them.
type csrMetrics struct {
	pending  *prometheus.CounterVec
	approved prometheus.Counter
	latency  prometheus.Histogram
}

// RegisterCSRApproval registers the approver's metrics and returns their observer
// (csrapproval.Observer).
func (m *Metrics) RegisterCSRApproval() csrapproval.Observer {
	c := &csrMetrics{
		pending: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nodeaddr_csr_pending_total",
			Help: "Kubelet-serving CSRs of the agent's Node left pending (once per CSR), by the rule they break.",
		}, []string{"reason"}),
		approved: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nodeaddr_csr_approved_total",
			Help: "Kubelet-serving CSRs of the agent's Node it approved.",
		}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "nodeaddr_csr_approval_seconds",
			Help:    "Time from a kubelet-serving CSR's creation to the agent's approval (whole seconds: creationTimestamp has no finer resolution).",
			Buckets: []float64{0.5, 1, 2, 3, 5, 10, 30, 60, 300},
		}),
	}
	m.Registry.MustRegister(c.pending, c.approved, c.latency)
	for _, r := range csrapproval.Reasons() {
		c.pending.WithLabelValues(r)
	}
	return c
}

func (c *csrMetrics) OnCSRPending(reason string) { c.pending.WithLabelValues(reason).Inc() }

func (c *csrMetrics) OnCSRApproved(d time.Duration) {
	c.approved.Inc()
	c.latency.Observe(d.Seconds())
}
