package remediation

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodeaddr/nodeaddr/internal/remediation/verdict"
)

// Results of an eviction, the label of nodeaddr_remediation_evictions_total.
const (
	ResultEvicted = "evicted" // the Eviction API accepted it
	ResultBlocked = "blocked" // refused with 429 (a PodDisruptionBudget): retried with backoff
	ResultRefused = "refused" // the remediator will not evict it (static pod, no controller, opted out): once per pod and reason
	ResultFailed  = "failed"  // any other error: retried
)

// Metrics are the remediator's collectors.
type Metrics struct {
	evictions *prometheus.CounterVec
	stale     *prometheus.GaugeVec
	oldest    func() float64
	Leader    prometheus.Gauge
}

// NewMetrics registers the remediator's metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		evictions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nodeaddr_remediation_evictions_total",
			Help: "Evictions of stale hostNetwork pods by result: evicted, blocked (429, a PodDisruptionBudget; retried), refused (not evicted: static pod, no controller, opted out; once per pod and reason), failed.",
		}, []string{"result"}),
		stale: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "nodeaddr_remediation_stale_pods",
			Help: "Stale hostNetwork pods (a pod IP, or an address its Node had when a container started, is no longer the Node's), by the remediator's verdict.",
		}, []string{"reason"}),
		oldest: func() float64 { return 0 },
		Leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nodeaddr_remediator_leader",
			Help: "1 while this remediator replica holds the leader Lease and acts, 0 on standby.",
		}),
	}
	oldest := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "nodeaddr_remediation_oldest_stale_seconds",
		Help: "Time since the Node's addresses changed, for the stale hostNetwork pod that has been stale longest (0: none).",
	}, func() float64 { return m.oldest() })
	reg.MustRegister(m.evictions, m.stale, oldest, m.Leader)
	for _, r := range []string{ResultEvicted, ResultBlocked, ResultRefused, ResultFailed} {
		m.evictions.WithLabelValues(r)
	}
	for _, r := range verdict.Reasons() {
		m.stale.WithLabelValues(r)
	}
	return m
}
