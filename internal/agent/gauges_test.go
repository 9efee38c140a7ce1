package agent

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/nodeaddr/nodeaddr/resolver"
)

type fakeState struct {
	addrs   []resolver.Address
	tainted bool
}

func (s *fakeState) DesiredAddresses() []resolver.Address { return s.addrs }
func (s *fakeState) Tainted() bool                        { return s.tainted }
func (s *fakeState) Managed() []resolver.AddressType {
	return []resolver.AddressType{resolver.InternalIP, resolver.ExternalIP}
}

// gaugesOf is a registry with the node gauges reading s (nil: a dry run).
func gaugesOf(s NodeState) *prometheus.Registry {
	r := prometheus.NewRegistry()
	r.MustRegister(newNodeGauges(s))
	return r
}

// The node gauges show the state as it is when scraped: no series for an address that is gone,
// the taint gauge 0 without a Node state (a dry run).
func TestNodeStateReadAtScrape(t *testing.T) {
	const header = `# HELP nodeaddr_address_info The managed node addresses nodeaddr publishes (value 1), by type, family and address.
# TYPE nodeaddr_address_info gauge
`
	const taintHeader = `# HELP nodeaddr_uninitialized_taint 1 while the Node carries the node.cloudprovider.kubernetes.io/uninitialized taint.
# TYPE nodeaddr_uninitialized_taint gauge
`
	check := func(r *prometheus.Registry, want string) {
		t.Helper()
		if err := testutil.GatherAndCompare(r, strings.NewReader(want),
			"nodeaddr_address_info", "nodeaddr_uninitialized_taint"); err != nil {
			t.Error(err)
		}
	}
	check(gaugesOf(nil), taintHeader+"nodeaddr_uninitialized_taint 0\n")

	s := &fakeState{tainted: true, addrs: []resolver.Address{
		{Type: resolver.InternalIP, IP: netip.MustParseAddr("10.0.0.5")},
		{Type: resolver.ExternalIP, IP: netip.MustParseAddr("2001:db8::5")},
	}}
	r := gaugesOf(s)
	check(r, header+`nodeaddr_address_info{address="10.0.0.5",family="IPv4",type="InternalIP"} 1
nodeaddr_address_info{address="2001:db8::5",family="IPv6",type="ExternalIP"} 1
`+taintHeader+"nodeaddr_uninitialized_taint 1\n")

	s.addrs, s.tainted = s.addrs[:1], false
	check(r, header+`nodeaddr_address_info{address="10.0.0.5",family="IPv4",type="InternalIP"} 1
`+taintHeader+"nodeaddr_uninitialized_taint 0\n")
}

// The managed types are read at scrape time too: an alert on a missing InternalIP joins on them.
func TestManagedTypesReadAtScrape(t *testing.T) {
	if err := testutil.GatherAndCompare(gaugesOf(nil), strings.NewReader(""), "nodeaddr_managed_info"); err != nil {
		t.Errorf("without a Node state: %v", err)
	}
	want := `# HELP nodeaddr_managed_info The address types this agent manages (value 1), by type.
# TYPE nodeaddr_managed_info gauge
nodeaddr_managed_info{type="ExternalIP"} 1
nodeaddr_managed_info{type="InternalIP"} 1
`
	if err := testutil.GatherAndCompare(gaugesOf(&fakeState{}), strings.NewReader(want), "nodeaddr_managed_info"); err != nil {
		t.Error(err)
	}
}
