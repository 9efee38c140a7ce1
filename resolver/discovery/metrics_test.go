package discovery

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/nodeaddr/nodeaddr/resolver"
)

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	New(Config{Servers: []Server{{"192.0.2.1", 3478}}, Metrics: m})
	m.probe("192.0.2.1:3478", ProbeSuccess, 20*time.Millisecond)
	m.probe("192.0.2.1:3478", ProbeTimeout, 5*time.Second)
	at := time.Unix(1_800_000_000, 0)
	m.round(resolver.IPv4, Agreed, at)
	m.round(resolver.IPv4, NoAnswer, at.Add(time.Minute))
	want := `
# HELP nodeaddr_discovery_last_success_timestamp_seconds Unix time of the last discovery round in which a majority of the STUN servers agreed, by family.
# TYPE nodeaddr_discovery_last_success_timestamp_seconds gauge
nodeaddr_discovery_last_success_timestamp_seconds{family="IPv4"} 1.8e+09
# HELP nodeaddr_discovery_probes_total STUN Binding requests sent for external-address discovery, by server and result (success, timeout, error).
# TYPE nodeaddr_discovery_probes_total counter
nodeaddr_discovery_probes_total{result="error",server="192.0.2.1:3478"} 0
nodeaddr_discovery_probes_total{result="success",server="192.0.2.1:3478"} 1
nodeaddr_discovery_probes_total{result="timeout",server="192.0.2.1:3478"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"nodeaddr_discovery_last_success_timestamp_seconds", "nodeaddr_discovery_probes_total"); err != nil {
		t.Error(err)
	}
	if got := testutil.ToFloat64(m.rounds.WithLabelValues("IPv4", "no_answer")); got != 1 {
		t.Errorf("rounds no_answer = %v, want 1", got)
	}
	// Every family and outcome exists from the start (the alert's rate needs a 0).
	if n := testutil.CollectAndCount(m.rounds); n != 8 {
		t.Errorf("%d rounds series, want 8 (2 families × 4 outcomes)", n)
	}
	if n := testutil.CollectAndCount(m.latency); n != 1 {
		t.Errorf("latency histogram: %d series", n)
	}
}
