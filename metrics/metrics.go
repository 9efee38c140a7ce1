// Package metrics defines nodeaddr's Prometheus metrics on a private registry and serves them with
// the health and readiness probes.
package metrics

import (
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/nodeaddr/nodeaddr/publisher"
	"github.com/nodeaddr/nodeaddr/resolver"
	"github.com/nodeaddr/nodeaddr/watcher"
)

// Metrics implements the Observer interfaces of watcher, resolver and publisher.
type Metrics struct {
	Registry *prometheus.Registry

	netlinkEvents   *prometheus.CounterVec
	resubscriptions *prometheus.CounterVec
	resolutions     *prometheus.CounterVec
	writes          *prometheus.CounterVec
	reaction        prometheus.Histogram
	state           *stateCollector
	overwrites      prometheus.Counter
	overwriteDelay  prometheus.Gauge
	lastResync      prometheus.Gauge
	nodeIPMissing   prometheus.Gauge
	discovery       discoveryMetrics
	listenerClosed  *prometheus.CounterVec
}

// New registers every metric, the Go and process collectors and nodeaddr_build_info (version and
// VCS revision as stamped at build time).
func New(version, revision string) *Metrics {
	r := prometheus.NewRegistry()
	m := &Metrics{
		Registry: r,
		netlinkEvents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nodeaddr_netlink_events_total",
			Help: "Kernel netlink notifications that could change the node addresses, by kind (address, route, link, rule).",
		}, []string{"kind"}),
		resubscriptions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nodeaddr_netlink_resubscriptions_total",
			Help: "Netlink subscriptions re-established after an error such as ENOBUFS (each forces a resync).",
		}, []string{"subscription"}),
		resolutions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nodeaddr_resolutions_total",
			Help: "Resolutions of the desired addresses from kernel state, by result.",
		}, []string{"result"}),
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nodeaddr_node_writes_total",
			Help: "Writes to the Node, by kind (addresses, annotations, taint) and result (success, conflict, error).",
		}, []string{"kind", "result"}),
		reaction: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "nodeaddr_reaction_seconds",
			Help:    "Time from the first kernel event of a burst to the accepted write of the resulting addresses.",
			Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 1, 2, 5, 10, 30},
		}),
		state: newStateCollector(),
		overwrites: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nodeaddr_overwrites_total",
			Help: "Times another writer replaced the addresses nodeaddr had written.",
		}),
		overwriteDelay: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nodeaddr_overwrite_backoff_seconds",
			Help: "Current delay before rewriting addresses another writer keeps reverting (0: not fighting).",
		}),
		lastResync: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nodeaddr_last_resync_timestamp_seconds",
			Help: "Unix time of the last periodic resync.",
		}),
		nodeIPMissing: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nodeaddr_provided_node_ip_missing",
			Help: "1 while the kubelet's alpha.kubernetes.io/provided-node-ip is not assigned to the host (the Node stays tainted).",
		}),
		discovery: newDiscoveryMetrics(),
		listenerClosed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nodeaddr_listener_connections_closed_total",
			Help: "Connections the metrics or probe listener closed to keep serving, by listener and reason (source_budget, listener_full, first_request_timeout).",
		}, []string{"listener", "reason"}),
	}
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "nodeaddr_build_info",
		Help: "Build information (value 1).",
	}, []string{"version", "revision", "goversion"})
	build.WithLabelValues(version, revision, runtime.Version()).Set(1)
	r.MustRegister(m.netlinkEvents, m.resubscriptions, m.resolutions, m.writes, m.reaction,
		m.state, m.overwrites, m.overwriteDelay, m.lastResync, m.nodeIPMissing, build,
		m.listenerClosed, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	r.MustRegister(m.discovery.collectors()...)
	// Pre-create label sets so every series exists from the start (rates and alerts need a 0).
	for _, k := range watcher.Kinds() {
		m.netlinkEvents.WithLabelValues(k)
		m.resubscriptions.WithLabelValues(k)
	}
	for _, r := range []string{resolver.ResultSuccess, resolver.ResultError} {
		m.resolutions.WithLabelValues(r)
	}
	for _, k := range publisher.WriteKinds() {
		for _, r := range publisher.WriteResults() {
			m.writes.WithLabelValues(k, r)
		}
	}
	for _, l := range []string{"metrics", "probes"} {
		for _, r := range []string{closedSourceBudget, closedListenerFull, closedNoRequestSent} {
			m.listenerClosed.WithLabelValues(l, r)
		}
	}
	return m
}

// onListenerClose returns the counter of connections listener's budget closed, by reason.
func (m *Metrics) onListenerClose(listener string) func(reason string) {
	return func(reason string) { m.listenerClosed.WithLabelValues(listener, reason).Inc() }
}

// OnNetlinkEvent counts a relevant netlink message.
func (m *Metrics) OnNetlinkEvent(kind string) { m.netlinkEvents.WithLabelValues(kind).Inc() }

// OnResubscribe counts a resubscription.
func (m *Metrics) OnResubscribe(sub string) { m.resubscriptions.WithLabelValues(sub).Inc() }

// OnResolution counts a resolution by result.
func (m *Metrics) OnResolution(result string) { m.resolutions.WithLabelValues(result).Inc() }

// OnResync records a periodic resync.
func (m *Metrics) OnResync(at time.Time) { m.lastResync.Set(float64(at.UnixNano()) / 1e9) }

// OnWrite counts a write to the Node.
func (m *Metrics) OnWrite(kind, result string) { m.writes.WithLabelValues(kind, result).Inc() }

// OnReaction observes a reaction latency.
func (m *Metrics) OnReaction(d time.Duration) { m.reaction.Observe(d.Seconds()) }

// OnOverwrite counts an overwrite by another writer.
func (m *Metrics) OnOverwrite() { m.overwrites.Inc() }

// OnOverwriteBackoff sets the current rewrite delay.
func (m *Metrics) OnOverwriteBackoff(d time.Duration) { m.overwriteDelay.Set(d.Seconds()) }

// OnProvidedNodeIP sets whether the provided node IP is missing from the host.
func (m *Metrics) OnProvidedNodeIP(missing bool) {
	v := 0.0
	if missing {
		v = 1
	}
	m.nodeIPMissing.Set(v)
}
