package resolver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// fakeTrigger is a one-slot signal like watcher.Signal.
type fakeTrigger struct {
	ch    chan struct{}
	mu    sync.Mutex
	first time.Time
}

func newFakeTrigger() *fakeTrigger { return &fakeTrigger{ch: make(chan struct{}, 1)} }

func (f *fakeTrigger) Raise(now time.Time) {
	f.mu.Lock()
	if f.first.IsZero() {
		f.first = now
	}
	f.mu.Unlock()
	select {
	case f.ch <- struct{}{}:
	default:
	}
}

func (f *fakeTrigger) C() <-chan struct{} { return f.ch }

func (f *fakeTrigger) Take() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.first
	f.first = time.Time{}
	return t
}

// publication is one Publish call, with times as offsets from the start of the bubble.
type publication struct {
	at    time.Duration
	since time.Duration // -1 when since was zero
	state State
}

func (p publication) String() string {
	since := "none"
	if p.since >= 0 {
		since = p.since.String()
	}
	return fmt.Sprintf("%v at %v since %s", p.state, p.at, since)
}

type recordingSink struct {
	start time.Time
	mu    sync.Mutex
	pubs  []publication
}

func (s *recordingSink) Publish(st State, since time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := publication{at: time.Since(s.start), since: -1, state: st}
	if !since.IsZero() {
		p.since = since.Sub(s.start)
	}
	s.pubs = append(s.pubs, p)
}

func (s *recordingSink) all() []publication {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.pubs)
}

func (s *recordingSink) times() []time.Duration {
	var out []time.Duration
	for _, p := range s.all() {
		out = append(out, p.at)
	}
	return out
}

// resolutions are the loop's counts of successful and failed resolutions.
type resolutions struct{ success, failed int }

// resolutions reads the loop's counters.
func (lt *loopTest) resolutions() resolutions {
	return resolutions{
		success: int(testutil.ToFloat64(lt.metrics.resolutions.WithLabelValues(ResultSuccess))),
		failed:  int(testutil.ToFloat64(lt.metrics.resolutions.WithLabelValues(ResultError))),
	}
}

// loopTest runs a Loop in the current synctest bubble.
type loopTest struct {
	t       *testing.T
	kernel  *fakeKernel
	trigger *fakeTrigger
	sink    *recordingSink
	metrics *Metrics
	start   time.Time
	stop    func()
	loop    *Loop
}

var (
	target4 = ip("198.51.100.1")
	src4    = ip("192.0.2.10")
	ext4    = Address{Type: ExternalIP, IP: src4, Interface: "eth0"}
)

// healthyKernel returns a kernel where target4 resolves to src4.
func healthyKernel() *fakeKernel {
	return &fakeKernel{routes: map[netip.Addr]netip.Addr{target4: src4}, addrs: []LocalAddr{local(src4.String())}}
}

// startLoop starts a Loop over k (healthyKernel when nil) and waits for its first resolution.
func startLoop(t *testing.T, cfg LoopConfig, k *fakeKernel) *loopTest {
	t.Helper()
	if k == nil {
		k = healthyKernel()
	}
	lt := &loopTest{t: t, kernel: k, trigger: newFakeTrigger(), start: time.Now()}
	lt.sink = &recordingSink{start: lt.start}
	lt.metrics = NewMetrics(prometheus.NewRegistry())
	cfg.Kernel = lt.kernel
	if cfg.Policy.Managed == nil {
		cfg.Policy.Managed = []AddressType{ExternalIP}
	}
	if cfg.Policy.Targets == nil {
		cfg.Policy.Targets = []Target{{Type: ExternalIP, IP: target4}}
	}
	cfg.Metrics = lt.metrics
	l := NewLoop(cfg, lt.trigger, lt.sink)
	lt.loop = l
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.Run(ctx)
	}()
	lt.stop = func() {
		cancel()
		<-done
	}
	t.Cleanup(lt.stop)
	synctest.Wait()
	return lt
}

// fakeNode is the Node as an informer would have it, for LoopConfig.Node.
type fakeNode struct {
	mu   sync.Mutex
	v    NodeInput
	seen bool
}

func (f *fakeNode) get() (NodeInput, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.v, f.seen
}

// set changes the Node and tells the loop, as the agent's informer event handler does.
func (f *fakeNode) set(l *Loop, v NodeInput) {
	f.mu.Lock()
	f.v, f.seen = v, true
	f.mu.Unlock()
	l.NodeChanged()
}

// sleep advances the bubble's clock by d and lets the loop settle.
func (lt *loopTest) sleep(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}

func (lt *loopTest) raise() { lt.trigger.Raise(time.Now()) }

func (lt *loopTest) now() time.Duration { return time.Since(lt.start) }

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

var extOnly = State{Managed: []AddressType{ExternalIP}, Addresses: []Address{ext4}}

func TestLoopBurstPublishesOnceAfterDebounce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lt := startLoop(t, LoopConfig{Debounce: ms(100), MaxDelay: time.Second}, nil)
		if got := lt.sink.all(); len(got) != 1 || got[0].at != 0 || got[0].since != -1 || !got[0].state.Equal(extOnly) {
			t.Fatalf("initial publications = %v, want one of %v at 0 without since", got, extOnly)
		}

		lt.sleep(time.Second)
		burstStart := lt.now()
		for range 50 {
			lt.raise()
			lt.sleep(ms(1)) // 50 triggers within 50ms, each within the debounce of the previous
		}
		lastEvent := lt.now() - ms(1)
		lt.sleep(lastEvent + ms(99) - lt.now()) // 1ms before the debounce after the last event ends
		if n := len(lt.sink.all()); n != 1 {
			t.Fatalf("%d publications before the debounce ended, want 1: %v (burst %v..%v)", n, lt.sink.times(), burstStart, lastEvent)
		}
		lt.sleep(10 * time.Second)
		got := lt.sink.all()
		if len(got) != 2 {
			t.Fatalf("publications = %v, want exactly one more after the burst", got)
		}
		if want := lastEvent + ms(100); got[1].at != want {
			t.Errorf("burst published at %v, want %v (debounce after the last event)", got[1].at, want)
		}
		if got[1].since != burstStart {
			t.Errorf("burst published with since %v, want its first event %v", got[1].since, burstStart)
		}
		if !got[1].state.Equal(extOnly) {
			t.Errorf("burst published %v, want %v", got[1].state, extOnly)
		}
	})
}

func TestLoopContinuousChurnIsNotStarved(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lt := startLoop(t, LoopConfig{Debounce: ms(100), MaxDelay: time.Second}, nil)
		// A trigger every 50ms for 3.5s: the debounce alone would never fire. Each trigger comes
		// after the loop handled whatever else happened at the same instant (sleep ends with
		// synctest.Wait), so the order of simultaneous events is fixed.
		for range 70 {
			lt.sleep(ms(50))
			lt.raise()
		}
		lt.sleep(10 * time.Second)
		got := lt.sink.all()
		wantAt := []time.Duration{0, ms(1050), ms(2050), ms(3050), ms(3600)}
		wantSince := []time.Duration{-1, ms(50), ms(1050), ms(2050), ms(3050)}
		if len(got) != len(wantAt) {
			t.Fatalf("published at %v, want at %v", lt.sink.times(), wantAt)
		}
		for i, p := range got {
			if p.at != wantAt[i] || p.since != wantSince[i] {
				t.Errorf("publication %d at %v since %v, want at %v since %v", i, p.at, p.since, wantAt[i], wantSince[i])
			}
		}
	})
}

func TestLoopHoldsAddressThatComesBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lt := startLoop(t, LoopConfig{Debounce: ms(100), MaxDelay: time.Second, RemovalGrace: 5 * time.Second}, nil)
		routes := map[netip.Addr]netip.Addr{target4: src4}
		// Long after the last resolution, a DHCP client flushes the address and re-adds it 3s
		// later; twice.
		for range 2 {
			lt.sleep(time.Minute)
			lt.kernel.set(nil)
			lt.raise()
			lt.sleep(3 * time.Second)
			lt.kernel.set(routes, local(src4.String()))
			lt.raise()
		}
		lt.sleep(time.Minute)
		got := lt.sink.all()
		if len(got) != 5 {
			t.Errorf("published at %v, want at start, and once per flush and per re-add", lt.sink.times())
		}
		for _, p := range got {
			if !p.state.Equal(extOnly) {
				t.Errorf("published %v at %v, want %v every time", p.state, p.at, extOnly)
			}
		}
	})
}

func TestLoopDropsAddressAfterGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lt := startLoop(t, LoopConfig{Debounce: ms(100), MaxDelay: time.Second, RemovalGrace: 5 * time.Second}, nil)
		lt.sleep(time.Minute)
		lt.kernel.set(nil)
		gone := lt.now()
		lt.raise()
		lt.sleep(time.Minute)

		empty := State{Managed: []AddressType{ExternalIP}}
		got := lt.sink.all()
		want := []publication{
			{at: 0, since: -1, state: extOnly},
			{at: gone + ms(100), since: gone, state: extOnly},             // held
			{at: gone + ms(100) + 5*time.Second, since: -1, state: empty}, // grace expired
		}
		if len(got) != len(want) {
			t.Fatalf("publications = %v, want %v", got, want)
		}
		for i := range want {
			if got[i].at != want[i].at || got[i].since != want[i].since || !got[i].state.Equal(want[i].state) {
				t.Errorf("publication %d = %v, want %v", i, got[i], want[i])
			}
		}
	})
}

func TestLoopResync(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lt := startLoop(t, LoopConfig{Debounce: ms(100), MaxDelay: time.Second, ResyncInterval: 10 * time.Second}, nil)
		lt.sleep(35 * time.Second)
		lt.stop()
		wantAt := []time.Duration{0, 10 * time.Second, 20 * time.Second, 30 * time.Second}
		if got := lt.sink.times(); !slices.Equal(got, wantAt) {
			t.Errorf("published at %v, want %v", got, wantAt)
		}
		for _, p := range lt.sink.all() {
			if !p.state.Equal(extOnly) || p.since != -1 {
				t.Errorf("publication at %v: %v since %v, want %v without since", p.at, p.state, p.since, extOnly)
			}
		}
		last := lt.start.Add(wantAt[len(wantAt)-1])
		if got, want := testutil.ToFloat64(lt.metrics.lastResync), float64(last.UnixNano())/1e9; got != want {
			t.Errorf("last resync at %v, want %v", got, want)
		}
		if got, want := lt.resolutions(), (resolutions{success: 4}); got != want {
			t.Errorf("resolutions = %+v, want %+v", got, want)
		}
	})
}

func TestLoopRetriesAfterError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := healthyKernel()
		k.routeErr = errors.New("netlink: boom")
		lt := startLoop(t, LoopConfig{Debounce: ms(100), MaxDelay: time.Second, RetryInterval: 2 * time.Second}, k)
		lt.sleep(3 * time.Second) // failed at 0 and 2s
		if got := lt.sink.all(); len(got) != 0 {
			t.Fatalf("published %v while resolution fails, want nothing", got)
		}
		k.setRouteErr(nil)
		lt.raise() // the event at 3s is resolved after the debounce, before the retry at 4s
		lt.sleep(time.Minute)
		lt.stop()

		want := publication{at: 3*time.Second + ms(100), since: 3 * time.Second, state: extOnly}
		if got := lt.sink.all(); len(got) != 1 || got[0].at != want.at || got[0].since != want.since || !got[0].state.Equal(want.state) {
			t.Errorf("publications = %v, want [%v]", got, want)
		}
		if got, want := lt.resolutions(), (resolutions{success: 1, failed: 2}); got != want {
			t.Errorf("resolutions = %+v, want %+v", got, want)
		}
	})
}

func TestLoopRetryAloneRecovers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := healthyKernel()
		k.addrErr = errors.New("netlink: boom")
		lt := startLoop(t, LoopConfig{Debounce: ms(100), MaxDelay: time.Second}, k)
		lt.sleep(ms(2500)) // default RetryInterval 1s: failed at 0, 1s and 2s
		k.mu.Lock()
		k.addrErr = nil
		k.mu.Unlock()
		lt.sleep(time.Minute)
		lt.stop()

		if got, want := lt.sink.times(), []time.Duration{3 * time.Second}; !slices.Equal(got, want) {
			t.Errorf("published at %v, want %v", got, want)
		}
		if got, want := lt.resolutions(), (resolutions{success: 1, failed: 3}); got != want {
			t.Errorf("resolutions = %+v, want %+v", got, want)
		}
	})
}

func TestLoopErrorWhileHolding(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := healthyKernel()
		lt := startLoop(t, LoopConfig{Debounce: ms(100), MaxDelay: time.Second, RemovalGrace: 5 * time.Second,
			RetryInterval: 2 * time.Second}, k)
		lt.sleep(time.Minute)
		k.set(nil) // the address goes: held until 1m5.1s
		lt.raise()
		lt.sleep(time.Second)
		// Netlink fails across the hold-down expiry. A guard ends the failure after 100 lookups so a
		// loop that retries without waiting fails this test instead of spinning forever.
		k.mu.Lock()
		k.routeErr = errors.New("netlink: boom")
		k.onRouteGet = func(k *fakeKernel) {
			if k.routeGets > 100 {
				k.routeErr = nil
			}
		}
		k.mu.Unlock()
		lt.sleep(10 * time.Second)
		k.setRouteErr(nil)
		lt.sleep(time.Minute)
		lt.stop()

		// Resolutions: start, the removal (held), then failures at the expiry (1m5.1s) and every
		// 2s after it until the error clears at 1m11s, then success at the retry at 1m11.1s.
		if got, want := lt.resolutions(), (resolutions{success: 3, failed: 3}); got != want {
			t.Errorf("resolutions = %+v, want %+v", got, want)
		}
		empty := State{Managed: []AddressType{ExternalIP}}
		got := lt.sink.all()
		if len(got) != 3 || got[2].at != 71*time.Second+ms(100) || !got[2].state.Equal(empty) {
			t.Errorf("publications = %v, want the start, the held address, then the removal at 1m11.1s", got)
		}
	})
}

// tablesKernel is a fakeKernel that can also list policy-routing tables, as Netlink does.
type tablesKernel struct{ *fakeKernel }

func (tablesKernel) RuleTables() ([]int, error) { return []int{100, 254}, nil }

// tableRecorder is a RouteTableFilter recording every list it is given.
type tableRecorder struct {
	mu  sync.Mutex
	got [][]int
}

func (r *tableRecorder) SetRouteTables(tables []int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, tables)
}

func TestLoopReportsRouteTables(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &tableRecorder{}
		l := NewLoop(LoopConfig{
			Kernel:   tablesKernel{healthyKernel()},
			Policy:   Policy{Managed: []AddressType{ExternalIP}, Targets: []Target{{Type: ExternalIP, IP: target4}}},
			Debounce: ms(100), ResyncInterval: time.Minute, RouteTables: rec,
		}, newFakeTrigger(), &recordingSink{start: time.Now()})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { defer close(done); l.Run(ctx) }()
		time.Sleep(90 * time.Second) // start and one resync
		cancel()
		<-done
		if want := [][]int{{100, 254}, {100, 254}}; !slices.EqualFunc(rec.got, want, slices.Equal) {
			t.Errorf("SetRouteTables calls = %v, want %v (one per resolution)", rec.got, want)
		}
	})
}

// The Loop hands its last published state to the policy: an equal-priority newcomer (even the new
// route source) does not flip the address; pod CIDRs set later are excluded at once.
func TestLoopStickyAndPodCIDRs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		node := &fakeNode{seen: true}
		cfg := LoopConfig{Debounce: ms(100), MaxDelay: time.Second, Node: node.get,
			Policy: Policy{Types: map[AddressType]TypePolicy{ExternalIP: {Interfaces: MustInterfaceRegexps("eth.*")}}}}
		lt := startLoop(t, cfg, nil)
		newcomer := LocalAddr{IP: ip("192.0.2.20"), LinkIndex: 1, Link: "eth1", PreferredLft: forever}
		lt.kernel.set(map[netip.Addr]netip.Addr{target4: newcomer.IP}, newcomer, local(src4.String()))
		lt.raise()
		lt.sleep(time.Second)
		got := lt.sink.all()
		if last := got[len(got)-1].state; !last.Equal(extOnly) {
			t.Fatalf("after an equal-priority newcomer: %v, want %v kept", last, extOnly)
		}

		node.set(lt.loop, NodeInput{PodCIDRs: []netip.Prefix{netip.MustParsePrefix("192.0.2.10/32")}})
		synctest.Wait()
		got = lt.sink.all()
		want := State{Managed: []AddressType{ExternalIP}, Addresses: []Address{{ExternalIP, newcomer.IP, "eth1", 0}}}
		if last := got[len(got)-1]; !last.state.Equal(want) || last.at != time.Second {
			t.Fatalf("after the pod CIDRs changed: %v, want %v published at once", last, want)
		}
	})
}

// With a Node source the first resolution waits for the Node, and keeps the address the Node already
// has among equal candidates: a restarted agent does not flip it to the route source. The wait
// is no stall for the health check.
// eth1Addr is a second uplink address, of equal priority with the route source under ethPolicy.
var (
	eth1Addr  = LocalAddr{IP: ip("192.0.2.20"), LinkIndex: 1, Link: "eth1", PreferredLft: forever}
	ethPolicy = Policy{Types: map[AddressType]TypePolicy{ExternalIP: {Interfaces: MustInterfaceRegexps("eth.*")}}}
)

func TestLoopWaitsForTheNodeAndKeepsItsAddress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		other := eth1Addr
		k := &fakeKernel{routes: map[netip.Addr]netip.Addr{target4: src4}, addrs: []LocalAddr{local(src4.String()), other}}
		node := &fakeNode{}
		lt := startLoop(t, LoopConfig{Debounce: ms(100), MaxDelay: time.Second, Node: node.get, Policy: ethPolicy}, k)
		lt.sleep(time.Minute)
		if got := lt.sink.all(); len(got) != 0 {
			t.Fatalf("published %v before the Node was known", got)
		}
		if idle := time.Since(lt.loop.LastTurn()); idle != 0 {
			t.Errorf("LastTurn %v ago while waiting for the Node, want now", idle)
		}
		node.set(lt.loop, NodeInput{Addresses: []Address{{Type: ExternalIP, IP: other.IP}}})
		synctest.Wait()
		want := State{Managed: []AddressType{ExternalIP}, Addresses: []Address{{ExternalIP, other.IP, "eth1", 0}}}
		got := lt.sink.all()
		if len(got) != 1 || !got[0].state.Equal(want) {
			t.Fatalf("once the Node is seen: %v, want one publication of %v (the Node's address, not the route source)", got, want)
		}
		// Once published, the loop's own choice is the reference: a later view of the Node (new pod
		// CIDRs, which resolve again at once) does not bring the Node's addresses back into play.
		node.set(lt.loop, NodeInput{PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/24")},
			Addresses: []Address{{Type: ExternalIP, IP: src4}}})
		synctest.Wait()
		got = lt.sink.all()
		if len(got) != 2 || !got[1].state.Equal(want) {
			t.Fatalf("after a second Node update: %v, want a second publication of %v", got, want)
		}
	})
}

// With a Node source the first resolution already excludes the Node's pod CIDRs: an address in them is
// never published, not even for a moment.
func TestLoopExcludesPodCIDRsFromTheStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := &fakeKernel{routes: map[netip.Addr]netip.Addr{target4: src4}, addrs: []LocalAddr{local(src4.String()), eth1Addr}}
		node := &fakeNode{}
		lt := startLoop(t, LoopConfig{Node: node.get, Policy: ethPolicy}, k)
		node.set(lt.loop, NodeInput{PodCIDRs: []netip.Prefix{netip.MustParsePrefix("192.0.2.10/32")}})
		synctest.Wait()
		want := State{Managed: []AddressType{ExternalIP}, Addresses: []Address{{ExternalIP, eth1Addr.IP, "eth1", 0}}}
		if got := lt.sink.all(); len(got) != 1 || !got[0].state.Equal(want) {
			t.Fatalf("publications %v, want exactly one of %v", got, want)
		}
	})
}

// Without a Node source (dry-run) nothing waits, and the route source wins among equals.
func TestLoopWithoutNodeStartsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := &fakeKernel{routes: map[netip.Addr]netip.Addr{target4: src4}, addrs: []LocalAddr{eth1Addr, local(src4.String())}}
		lt := startLoop(t, LoopConfig{Debounce: ms(100), MaxDelay: time.Second, Policy: ethPolicy}, k)
		if got := lt.sink.all(); len(got) != 1 || !got[0].state.Equal(extOnly) || got[0].at != 0 {
			t.Fatalf("publications %v, want %v at once", got, extOnly)
		}
	})
}

// An agent restarted while the host has no address (a DHCP client between two leases) keeps the
// Node's address for the removal grace, as the agent before the restart would have, instead of
// publishing its removal at once (found by test/soak: an empty InternalIP list 0.7 s after the
// address went).
func TestLoopRestartHoldsTheNodesAddress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		node := &fakeNode{seen: true, v: NodeInput{Addresses: []Address{{Type: ExternalIP, IP: src4}}}}
		k := &fakeKernel{routes: map[netip.Addr]netip.Addr{}}
		lt := startLoop(t, LoopConfig{Debounce: ms(100), MaxDelay: time.Second, RemovalGrace: 5 * time.Second, Node: node.get}, k)
		lt.sleep(time.Minute)
		held := State{Managed: []AddressType{ExternalIP}, Addresses: []Address{{Type: ExternalIP, IP: src4}}}
		empty := State{Managed: []AddressType{ExternalIP}}
		got := lt.sink.all()
		if len(got) != 2 || got[0].at != 0 || !got[0].state.Equal(held) || got[1].at != 5*time.Second || !got[1].state.Equal(empty) {
			t.Fatalf("publications = %v, want the Node's address held at 0 and removed at 5s", got)
		}
	})
}

// The Node's stages run again on the last kernel result when what they read changes, publishing
// at once without reading the kernel: another writer's InternalIP that the ExternalIP equals, the
// kubelet's provided-node-ip annotation. The Node's own managed addresses (the echo of a write)
// change nothing.
func TestLoopRerunsNodeStagesWithoutKernelRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := healthyKernel()
		k.addrs = append(k.addrs, local("192.0.2.11"))
		node := &fakeNode{seen: true}
		lt := startLoop(t, LoopConfig{Debounce: ms(100), MaxDelay: time.Second, Node: node.get,
			Policy: Policy{Managed: []AddressType{InternalIP, ExternalIP},
				Targets: []Target{{Type: InternalIP, IP: target4}, {Type: ExternalIP, IP: target4}}, ReportLocal: true}}, k)
		reads := func() int {
			k.mu.Lock()
			defer k.mu.Unlock()
			return k.routeGets
		}
		before := reads()
		lt.sleep(time.Second)
		node.set(lt.loop, NodeInput{ProvidedNodeIP: "192.0.2.11"})
		lt.sleep(time.Second)
		node.set(lt.loop, NodeInput{ProvidedNodeIP: "192.0.2.11",
			Addresses: []Address{addr(InternalIP, "192.0.2.11"), addr(ExternalIP, "192.0.2.10")}})
		lt.sleep(time.Second)
		node.set(lt.loop, NodeInput{ProvidedNodeIP: "10.9.9.9"})
		lt.sleep(time.Second)
		var got []string
		for _, p := range lt.sink.all() {
			got = append(got, fmt.Sprintf("%v at %v missing %v", p.state, p.at, p.state.NodeIP.Missing))
		}
		want := []string{
			"[InternalIP=192.0.2.10] at 0s missing []", // the ExternalIP equals the InternalIP
			"[InternalIP=192.0.2.11 ExternalIP=192.0.2.10] at 1s missing []",
			"[InternalIP=192.0.2.10] at 3s missing [10.9.9.9]",
		}
		if !slices.Equal(got, want) {
			t.Errorf("published\n%q\nwant\n%q", got, want)
		}
		if n := reads() - before; n != 0 {
			t.Errorf("%d kernel reads after the first resolution, want none", n)
		}
	})
}

// Without managing InternalIP, another writer's InternalIP (the kubelet's --node-ip) that equals
// the ExternalIP drops it, and the ExternalIP comes back when that InternalIP goes.
func TestLoopFollowsAnotherWritersInternalIP(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		node := &fakeNode{seen: true}
		lt := startLoop(t, LoopConfig{Debounce: ms(100), MaxDelay: time.Second, Node: node.get}, nil)
		lt.sleep(time.Second)
		node.set(lt.loop, NodeInput{Unmanaged: []Address{addr(InternalIP, src4.String())}})
		lt.sleep(time.Second)
		node.set(lt.loop, NodeInput{})
		lt.sleep(time.Second)
		var got []string
		for _, p := range lt.sink.all() {
			got = append(got, fmt.Sprintf("%v at %v dropped %v", p.state, p.at, p.state.DroppedEqual))
		}
		want := []string{"[ExternalIP=192.0.2.10] at 0s dropped false", "[] at 1s dropped true", "[ExternalIP=192.0.2.10] at 2s dropped false"}
		if !slices.Equal(got, want) {
			t.Errorf("published %q, want %q", got, want)
		}
	})
}

// The record of a change says which debounce hold it waited for, so an operator reading the log
// sees why it took 10 ms or 100 ms.
func TestLoopLogsTheDebounceWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf syncBuffer
		log := slog.New(slog.NewTextHandler(&buf, nil))
		lt := startLoop(t, LoopConfig{Debounce: ms(10), LinkDebounce: ms(100), MaxDelay: time.Second, Logger: log}, nil)
		lt.sleep(time.Second)
		lt.kernel.set(nil)
		lt.raise()
		lt.sleep(time.Second)
		want := `waited="quiet 10ms after the last address, route or rule event"`
		if got := buf.String(); !strings.Contains(got, `msg="desired addresses changed"`) || !strings.Contains(got, want) {
			t.Fatalf("log:\n%s\nwant a change record with %s", got, want)
		}
	})
}

// syncBuffer is a bytes.Buffer safe for the loop's goroutine and the test's.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
