package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodeaddr/nodeaddr/resolver"
)

// NodeState is what the node gauges read at scrape time (the agent's publisher).
type NodeState interface {
	DesiredAddresses() []resolver.Address
	Managed() []resolver.AddressType
	Tainted() bool
}

// stateCollector reads the node gauges from a NodeState when scraped, as node_exporter's collectors
// read the system: no copy to keep in step. Without a NodeState there is no address and no taint.
type stateCollector struct {
	addressInfo, managed, taint *prometheus.Desc

	mu    sync.Mutex
	state NodeState
}

func newStateCollector() *stateCollector {
	return &stateCollector{
		addressInfo: prometheus.NewDesc("nodeaddr_address_info",
			"The managed node addresses nodeaddr publishes (value 1), by type, family and address.", []string{"type", "family", "address"}, nil),
		// An alert on a missing InternalIP needs to tell "none resolved" from "not managed"
		// (--internal-ip-target=none): only the first is a lost outcome.
		managed: prometheus.NewDesc("nodeaddr_managed_info",
			"The address types this agent manages (value 1), by type.", []string{"type"}, nil),
		taint: prometheus.NewDesc("nodeaddr_uninitialized_taint",
			"1 while the Node carries the node.cloudprovider.kubernetes.io/uninitialized taint.", nil, nil),
	}
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.addressInfo
	ch <- c.managed
	ch <- c.taint
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	s := c.state
	c.mu.Unlock()
	tainted := 0.0
	if s != nil {
		for _, a := range s.DesiredAddresses() {
			ch <- prometheus.MustNewConstMetric(c.addressInfo, prometheus.GaugeValue, 1,
				string(a.Type), resolver.FamilyOf(a.IP).String(), a.IP.String())
		}
		for _, t := range s.Managed() {
			ch <- prometheus.MustNewConstMetric(c.managed, prometheus.GaugeValue, 1, string(t))
		}
		if s.Tainted() {
			tainted = 1
		}
	}
	ch <- prometheus.MustNewConstMetric(c.taint, prometheus.GaugeValue, tainted)
}

// ReadNodeState makes the node gauges read s at scrape time.
func (m *Metrics) ReadNodeState(s NodeState) {
	m.state.mu.Lock()
	defer m.state.mu.Unlock()
	m.state.state = s
}
