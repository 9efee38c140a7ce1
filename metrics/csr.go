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
	// certState and certExpiry show the kubelet's serving certificate as the agent last read it.
	certState  *prometheus.GaugeVec
	certExpiry prometheus.Gauge
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
		certState: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "nodeaddr_kubelet_serving_certificate_state",
			Help: "1 for the state of the kubelet's serving certificate as the agent last read it on this host: current (covers every published address, before 70% of its life; no CSR expected, no request), uncovered (misses a published address), rotating (past 70% of its life) or unknown (not read); 0 for the others.",
		}, []string{"state"}),
		certExpiry: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nodeaddr_kubelet_serving_certificate_expiry_timestamp_seconds",
			Help: "NotAfter of the kubelet's serving certificate as the agent last read it (Unix seconds; 0 when not read).",
		}),
	}
	m.Registry.MustRegister(c.pending, c.approved, c.latency, c.certState, c.certExpiry)
	for _, r := range csrapproval.Reasons() {
		c.pending.WithLabelValues(r)
	}
	c.OnKubeletCert(csrapproval.CertUnknown, time.Time{})
	return c
}

// OnKubeletCert is csrapproval.CertObserver.
func (c *csrMetrics) OnKubeletCert(state csrapproval.CertState, notAfter time.Time) {
	for _, s := range []csrapproval.CertState{csrapproval.CertCurrent, csrapproval.CertUncovered, csrapproval.CertRotating, csrapproval.CertUnknown} {
		v := 0.0
		if s == state {
			v = 1
		}
		c.certState.WithLabelValues(string(s)).Set(v)
	}
	expiry := 0.0
	if !notAfter.IsZero() {
		expiry = float64(notAfter.Unix())
	}
	c.certExpiry.Set(expiry)
}

func (c *csrMetrics) OnCSRPending(reason string) { c.pending.WithLabelValues(reason).Inc() }

func (c *csrMetrics) OnCSRApproved(d time.Duration) {
	c.approved.Inc()
	c.latency.Observe(d.Seconds())
}
