package discovery

import (
	"context"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/nodeaddr/nodeaddr/resolver"
)

// fakeNAT answers probes as a NAT with per-server mappings would; a server without a mapping is
// down.
type fakeNAT struct {
	mu      sync.Mutex
	mapping map[string]netip.Addr
	probes  []string // server@source
}

func (n *fakeNAT) set(m map[string]string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.mapping = map[string]netip.Addr{}
	for s, a := range m {
		if a == "none" {
			n.mapping[s] = netip.Addr{}
			continue
		}
		n.mapping[s] = netip.MustParseAddr(a)
	}
}

func (n *fakeNAT) Probe(ctx context.Context, src netip.Addr, s Server) (netip.Addr, error) {
	n.mu.Lock()
	n.probes = append(n.probes, s.String()+"@"+src.String())
	a, ok := n.mapping[s.String()]
	if src.Is6() {
		a, ok = n.mapping[s.String()+"/6"]
	}
	n.mu.Unlock()
	if ok && !a.IsValid() { // "none": the server has no address of this family
		return netip.Addr{}, errNoFamily
	}
	if !ok {
		<-ctx.Done()
		return netip.Addr{}, context.Cause(ctx)
	}
	return a, nil
}

func (n *fakeNAT) count() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.probes)
}

type recorder struct {
	metrics  *Metrics
	mu       sync.Mutex
	warnings []string
}

func (r *recorder) warn(f resolver.Family, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.warnings = append(r.warnings, f.String()+": "+reason)
}

// snapshot returns the outcomes of the rounds counted so far (each as many times as it was
// counted) and the warnings.
func (r *recorder) snapshot() ([]Outcome, []string) {
	var outcomes []Outcome
	for _, f := range families {
		for _, o := range Outcomes() {
			for range int(testutil.ToFloat64(r.metrics.rounds.WithLabelValues(f.String(), string(o)))) {
				outcomes = append(outcomes, o)
			}
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return outcomes, slices.Clone(r.warnings)
}

func start(t *testing.T, cfg Config) (*Discoverer, *fakeNAT, *recorder) {
	t.Helper()
	nat, rec := &fakeNAT{}, &recorder{metrics: NewMetrics(prometheus.NewRegistry())}
	cfg.Prober, cfg.Metrics, cfg.OnDisagreement = nat, rec.metrics, rec.warn
	if cfg.Servers == nil {
		cfg.Servers = []Server{{"192.0.2.1", 3478}, {"192.0.2.2", 3478}}
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 50 * time.Millisecond
	}
	d := New(cfg)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return d, nat, rec
}

// waitC waits for the change signal and returns the IPv4 answer then.
func waitC(t *testing.T, d *Discoverer, what string) (netip.Addr, bool) {
	t.Helper()
	select {
	case <-d.C():
	case <-time.After(10 * time.Second):
		t.Fatalf("no change signal: %s", what)
	}
	return d.Mapped(resolver.IPv4)
}

func src(s string) map[resolver.Family]netip.Addr {
	return map[resolver.Family]netip.Addr{resolver.IPv4: netip.MustParseAddr(s)}
}

func TestDiscovererFollowsTheNAT(t *testing.T) {
	d, nat, rec := start(t, Config{Interval: 100 * time.Millisecond, StaleAfter: time.Hour, FirstRetry: 20 * time.Millisecond})
	nat.set(map[string]string{"192.0.2.1:3478": "203.0.113.10", "192.0.2.2:3478": "203.0.113.10"})
	if _, ok := d.Mapped(resolver.IPv4); ok {
		t.Fatal("an answer before any probe")
	}
	d.Update(src("10.0.1.2"))
	if got, ok := waitC(t, d, "first answer"); !ok || got != netip.MustParseAddr("203.0.113.10") {
		t.Fatalf("Mapped = %v %v, want 203.0.113.10", got, ok)
	}
	// The NAT changes its public address with no local event: the re-check finds it.
	nat.set(map[string]string{"192.0.2.1:3478": "203.0.113.20", "192.0.2.2:3478": "203.0.113.20"})
	if got, ok := waitC(t, d, "re-check"); !ok || got != netip.MustParseAddr("203.0.113.20") {
		t.Fatalf("after the NAT changed: Mapped = %v %v, want 203.0.113.20", got, ok)
	}
	// A new route source is probed at once, from that source.
	d.Update(src("10.0.2.2"))
	nat.set(map[string]string{"192.0.2.1:3478": "203.0.113.30", "192.0.2.2:3478": "203.0.113.30"})
	if got, ok := waitC(t, d, "new source"); !ok || got != netip.MustParseAddr("203.0.113.30") {
		t.Fatalf("after the source changed: Mapped = %v %v", got, ok)
	}
	nat.mu.Lock()
	last := nat.probes[len(nat.probes)-1]
	nat.mu.Unlock()
	if last[len(last)-len("@10.0.2.2"):] != "@10.0.2.2" {
		t.Errorf("last probe %s, want one from 10.0.2.2", last)
	}
	if outcomes, warnings := rec.snapshot(); slices.Contains(outcomes, Disagreement) || len(warnings) != 0 {
		t.Errorf("outcomes %v, warnings %v: want no disagreement", outcomes, warnings)
	}
}

func TestDiscovererKeepsTheAnswerThroughAnOutage(t *testing.T) {
	d, nat, rec := start(t, Config{Interval: 50 * time.Millisecond, StaleAfter: time.Hour, FirstRetry: 10 * time.Millisecond})
	nat.set(map[string]string{"192.0.2.1:3478": "203.0.113.10", "192.0.2.2:3478": "203.0.113.10"})
	d.Update(src("10.0.1.2"))
	waitC(t, d, "first answer")
	nat.set(nil) // both servers down
	for n := nat.count(); nat.count() < n+10; {
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case <-d.C():
		t.Error("change signal during the outage")
	default:
	}
	if got, ok := d.Mapped(resolver.IPv4); !ok || got != netip.MustParseAddr("203.0.113.10") {
		t.Errorf("during the outage: Mapped = %v %v, want the last good answer", got, ok)
	}
	if testutil.ToFloat64(rec.metrics.probes.WithLabelValues("192.0.2.1:3478", ProbeTimeout)) == 0 {
		t.Error("no probe counted as a timeout")
	}
}

func TestDiscovererDropsAStaleAnswer(t *testing.T) {
	d, nat, _ := start(t, Config{Interval: 50 * time.Millisecond, StaleAfter: 300 * time.Millisecond, FirstRetry: 10 * time.Millisecond})
	nat.set(map[string]string{"192.0.2.1:3478": "203.0.113.10", "192.0.2.2:3478": "203.0.113.10"})
	d.Update(src("10.0.1.2"))
	waitC(t, d, "first answer")
	nat.set(nil)
	if got, ok := waitC(t, d, "expiry"); ok {
		t.Errorf("after stale-after: Mapped = %v, want none", got)
	}
}

func TestDiscovererDisagreement(t *testing.T) {
	d, nat, rec := start(t, Config{Interval: 50 * time.Millisecond, StaleAfter: time.Hour, FirstRetry: 10 * time.Millisecond})
	nat.set(map[string]string{"192.0.2.1:3478": "203.0.113.10", "192.0.2.2:3478": "203.0.113.10"})
	d.Update(src("10.0.1.2"))
	waitC(t, d, "first answer")
	nat.set(map[string]string{"192.0.2.1:3478": "203.0.113.10", "192.0.2.2:3478": "198.51.100.7"})
	for n := nat.count(); nat.count() < n+10; {
		time.Sleep(10 * time.Millisecond)
	}
	// Another disagreement in the same episode (a pool of NAT addresses): no second warning.
	nat.set(map[string]string{"192.0.2.1:3478": "203.0.113.10", "192.0.2.2:3478": "198.51.100.8"})
	for n := nat.count(); nat.count() < n+10; {
		time.Sleep(10 * time.Millisecond)
	}
	if got, ok := d.Mapped(resolver.IPv4); !ok || got != netip.MustParseAddr("203.0.113.10") {
		t.Errorf("while the servers disagree: Mapped = %v %v, want the last agreed answer", got, ok)
	}
	_, warnings := rec.snapshot()
	want := []string{"IPv4: servers disagree: 192.0.2.1:3478=203.0.113.10 192.0.2.2:3478=198.51.100.7"}
	if !slices.Equal(warnings, want) {
		t.Errorf("warnings %q, want exactly %q (one per episode)", warnings, want)
	}
}

func TestDiscovererWithoutSourceSendsNothing(t *testing.T) {
	d, nat, _ := start(t, Config{Interval: 10 * time.Millisecond})
	nat.set(map[string]string{"192.0.2.1:3478": "203.0.113.10", "192.0.2.2:3478": "203.0.113.10"})
	time.Sleep(100 * time.Millisecond)
	d.Update(map[resolver.Family]netip.Addr{})
	time.Sleep(50 * time.Millisecond)
	if n := nat.count(); n != 0 {
		t.Errorf("%d probes with no route source, want 0", n)
	}
}

func TestDiscovererOnce(t *testing.T) {
	nat := &fakeNAT{}
	nat.set(map[string]string{"192.0.2.1:3478": "203.0.113.10", "192.0.2.2:3478": "203.0.113.10"})
	d := New(Config{Servers: []Server{{"192.0.2.1", 3478}, {"192.0.2.2", 3478}}, Prober: nat, Timeout: 50 * time.Millisecond})
	d.Once(t.Context(), src("10.0.1.2"))
	if got, ok := d.Mapped(resolver.IPv4); !ok || got != netip.MustParseAddr("203.0.113.10") {
		t.Errorf("after Once: Mapped = %v %v", got, ok)
	}
	if _, ok := d.Mapped(resolver.IPv6); ok {
		t.Error("an IPv6 answer without an IPv6 source")
	}
	if n := nat.count(); n != 2 {
		t.Errorf("%d probes, want 2 (one per server, IPv4 only)", n)
	}
}

// Both families' first answers come with one change signal (one resolution, one write).
func TestDiscovererOneSignalForBothFamilies(t *testing.T) {
	d, nat, _ := start(t, Config{Interval: time.Hour, StaleAfter: time.Hour, Servers: namedServers})
	nat.set(map[string]string{"a.example:3478": "203.0.113.10", "b.example:3478": "203.0.113.10",
		"a.example:3478/6": "2001:db8:113::10", "b.example:3478/6": "2001:db8:113::10"})
	d.Update(map[resolver.Family]netip.Addr{resolver.IPv4: netip.MustParseAddr("10.0.1.2"), resolver.IPv6: netip.MustParseAddr("fd00::2")})
	waitC(t, d, "first answers")
	if _, ok := d.Mapped(resolver.IPv6); !ok {
		t.Error("IPv4's answer signalled before IPv6's round ended")
	}
	if _, ok := d.Mapped(resolver.IPv4); !ok {
		t.Error("no IPv4 answer")
	}
}

var namedServers = []Server{{"a.example", 3478}, {"b.example", 3478}}

// Servers given by name cover both families until a round finds that none of them has an address
// of one (no AAAA record): that family is then not covered (its route source stays the ExternalIP),
// with a change signal; when a later round finds an address, it is covered again.
func TestDiscovererFamilyWithoutServerAddress(t *testing.T) {
	d, nat, rec := start(t, Config{Interval: 50 * time.Millisecond, FirstRetry: time.Hour, StaleAfter: time.Hour, Servers: namedServers})
	nat.set(map[string]string{"a.example:3478": "203.0.113.10", "b.example:3478": "203.0.113.10",
		"a.example:3478/6": "none", "b.example:3478/6": "none"})
	if !d.Covers(resolver.IPv6) || !d.Covers(resolver.IPv4) {
		t.Fatal("names do not cover both families before a round")
	}
	d.Update(map[resolver.Family]netip.Addr{resolver.IPv4: netip.MustParseAddr("10.0.1.2"), resolver.IPv6: netip.MustParseAddr("2001:db8:1::2")})
	waitC(t, d, "first answers")
	if d.Covers(resolver.IPv6) {
		t.Error("IPv6 still covered after a round in which no server had an IPv6 address")
	}
	if !d.Covers(resolver.IPv4) {
		t.Error("IPv4 not covered")
	}
	if _, ok := d.Mapped(resolver.IPv6); ok {
		t.Error("an IPv6 answer without an IPv6 server")
	}
	if _, warnings := rec.snapshot(); len(warnings) != 0 {
		t.Errorf("warnings %v, want none", warnings)
	}
	// One server gains an AAAA record but does not answer yet: IPv6 is covered again, with a change
	// signal (the loop must drop the route source), and has no answer.
	nat.set(map[string]string{"a.example:3478": "203.0.113.10", "b.example:3478": "203.0.113.10",
		"b.example:3478/6": "none"})
	waitC(t, d, "IPv6 covered again")
	if !d.Covers(resolver.IPv6) {
		t.Fatal("IPv6 not covered after a server gained an IPv6 address")
	}
	if a, ok := d.Mapped(resolver.IPv6); ok {
		t.Errorf("IPv6 answer %s from a server that did not answer", a)
	}
}

// A family that has a current answer stays covered when a round finds no server with an address
// of it (a DNS answer that lost its AAAA records for a moment): the answer is kept until it is
// stale, as for any failed round, and only then does the family fall back to its route source.
func TestDiscovererKeepsCoverageWhileAnswerIsCurrent(t *testing.T) {
	d, nat, _ := start(t, Config{Interval: 30 * time.Millisecond, FirstRetry: 30 * time.Millisecond,
		StaleAfter: 500 * time.Millisecond, Servers: namedServers})
	nat.set(map[string]string{"a.example:3478": "203.0.113.10", "b.example:3478": "203.0.113.10"})
	d.Update(src("10.0.1.2"))
	waitC(t, d, "first answer")
	nat.set(map[string]string{"a.example:3478": "none", "b.example:3478": "none"})
	for n := nat.count(); nat.count() < n+6; { // three rounds
		time.Sleep(10 * time.Millisecond)
	}
	if a, ok := d.Mapped(resolver.IPv4); !d.Covers(resolver.IPv4) || !ok || a != netip.MustParseAddr("203.0.113.10") {
		t.Fatalf("after rounds without a server address: covered %v, answer %v %v; want covered with the current answer",
			d.Covers(resolver.IPv4), a, ok)
	}
	deadline := time.Now().Add(10 * time.Second)
	for d.Covers(resolver.IPv4) {
		if time.Now().After(deadline) {
			t.Fatal("IPv4 still covered long after its answer went stale")
		}
		select {
		case <-d.C():
		case <-time.After(50 * time.Millisecond):
		}
	}
	if _, ok := d.Mapped(resolver.IPv4); ok {
		t.Error("a stale answer is still used")
	}
}
