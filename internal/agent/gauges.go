package agent

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodeaddr/nodeaddr/resolver"
)

// NodeState is what the node gauges read at scrape time (the agent's publisher).
type NodeState interface {
	DesiredAddresses() []resolver.Address
	Managed() []resolver.AddressType
	Tainted() bool
}

// nodeGauges reads the node gauges from a NodeState when scraped, as node_exporter's collectors
// read the system: no copy to keep in step. Without a NodeState (a dry run) there is no address
// and no taint.
type nodeGauges struct {
	addressInfo, managed, taint *prometheus.Desc
	state                       NodeState // nil in a dry run
}

func newNodeGauges(s NodeState) *nodeGauges {
	return &nodeGauges{
		addressInfo: prometheus.NewDesc("nodeaddr_address_info",
			"The managed node addresses nodeaddr publishes (value 1), by type, family and address.", []string{"type", "family", "address"}, nil),
		// An alert on a missing InternalIP needs to tell "none resolved" from "not managed"
		// (--internal-ip-target=none): only the first is a lost outcome.
		managed: prometheus.NewDesc("nodeaddr_managed_info",
			"The address types this agent manages (value 1), by type.", []string{"type"}, nil),
		taint: prometheus.NewDesc("nodeaddr_uninitialized_taint",
			"1 while the Node carries the node.cloudprovider.kubernetes.io/uninitialized taint.", nil, nil),
		state: s,
	}
}

func (c *nodeGauges) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.addressInfo
	ch <- c.managed
	ch <- c.taint
}

func (c *nodeGauges) Collect(ch chan<- prometheus.Metric) {
	tainted := 0.0
	if s := c.state; s != nil {
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
