package watcher

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the watcher's collectors (NewMetrics); a nil *Metrics records nothing.
type Metrics struct {
	events, resubscriptions *prometheus.CounterVec
	// byKind spares the receive loop the vector's hashed, locked lookup.
	byKind map[string]prometheus.Counter
}

// NewMetrics registers the watcher's metrics on reg, each kind's series at 0.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nodeaddr_netlink_events_total",
			Help: "Kernel netlink notifications that could change the node addresses, by kind (address, route, link, rule).",
		}, []string{"kind"}),
		resubscriptions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nodeaddr_netlink_resubscriptions_total",
			Help: "Netlink subscriptions re-established after an error such as ENOBUFS (each forces a resync).",
		}, []string{"subscription"}),
	}
	reg.MustRegister(m.events, m.resubscriptions)
	m.byKind = map[string]prometheus.Counter{}
	for _, k := range Kinds() {
		m.byKind[k] = m.events.WithLabelValues(k)
		m.resubscriptions.WithLabelValues(k)
	}
	return m
}

func (m *Metrics) netlinkEvent(kind string) {
	if m == nil {
		return
	}
	if c, ok := m.byKind[kind]; ok {
		c.Inc()
		return
	}
	m.events.WithLabelValues(kind).Inc()
}

func (m *Metrics) resubscribed(subscription string) {
	if m != nil {
		m.resubscriptions.WithLabelValues(subscription).Inc()
	}
}
