package resolver

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the loop's collectors (NewMetrics); a nil *Metrics records nothing.
type Metrics struct {
	resolutions *prometheus.CounterVec
	lastResync  prometheus.Gauge
}

// NewMetrics registers the loop's metrics on reg, each result's series at 0.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		resolutions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nodeaddr_resolutions_total",
			Help: "Resolutions of the desired addresses from kernel state, by result.",
		}, []string{"result"}),
		lastResync: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nodeaddr_last_resync_timestamp_seconds",
			Help: "Unix time of the last periodic resync.",
		}),
	}
	reg.MustRegister(m.resolutions, m.lastResync)
	for _, r := range []string{ResultSuccess, ResultError} {
		m.resolutions.WithLabelValues(r)
	}
	return m
}

func (m *Metrics) resolution(result string) {
	if m != nil {
		m.resolutions.WithLabelValues(result).Inc()
	}
}

func (m *Metrics) resync(at time.Time) {
	if m != nil {
		m.lastResync.Set(float64(at.UnixNano()) / 1e9)
	}
}
