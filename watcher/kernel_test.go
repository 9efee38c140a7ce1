package watcher

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/nodeaddr/nodeaddr/internal/netnstest"
)

// TestMain runs the package's tests inside a throwaway network namespace (see netnstest); the kernel
// tests below skip when it could not be made.
func TestMain(m *testing.M) { os.Exit(netnstest.Main(m)) }

// wait bounds every wait for the kernel: a failure bound, never an expected duration.
const wait = 20 * time.Second

// counts reads the watcher's metrics from a registry of their own.
type counts struct{ m *Metrics }

func newCounts() counts { return counts{NewMetrics(prometheus.NewRegistry())} }

// snapshot lists the events and the resubscriptions counted so far, each kind as many times as it
// was counted, in Kinds' order.
func (c counts) snapshot() (events, resubscribed []string) {
	for _, k := range Kinds() {
		for range int(testutil.ToFloat64(c.m.events.WithLabelValues(k))) {
			events = append(events, k)
		}
		for range int(testutil.ToFloat64(c.m.resubscriptions.WithLabelValues(k))) {
			resubscribed = append(resubscribed, k)
		}
	}
	return events, resubscribed
}

// eventually polls cond until it holds, failing t after the wait bound.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(wait); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
	}
}

// veth creates a veth pair (see netnstest.Veth) and waits until the kernel has finished reacting to
// it on its own: carrier up (reported by linkwatch, asynchronously) and no IPv6 address left in
// duplicate-address detection. Events from that would otherwise reach a watcher started afterwards.
// DAD is switched off in the namespace so that takes milliseconds, not seconds.
func veth(t *testing.T, name string) {
	t.Helper()
	netnstest.Sysctl(t, "net.ipv6.conf.all.accept_dad", "0")
	netnstest.Sysctl(t, "net.ipv6.conf.default.accept_dad", "0")
	netnstest.Veth(t, name)
	for _, dev := range []string{name, name + "p"} {
		eventually(t, dev+" is up and DAD done", func() bool {
			b, err := os.ReadFile(filepath.Join("/sys/class/net", dev, "operstate"))
			if err != nil || strings.TrimSpace(string(b)) != "up" {
				return false
			}
			out, err := runIP("-6", "addr", "show", "dev", dev, "tentative")
			return err == nil && strings.TrimSpace(out) == ""
		})
	}
}

func runIP(args ...string) (string, error) {
	out, err := exec.Command("ip", args...).CombinedOutput()
	return string(out), err
}

type watcherTest struct {
	t      *testing.T
	w      *Watcher
	sig    *Signal
	obs    counts
	cancel context.CancelFunc
	done   chan struct{}
}

// startWatcher runs a Watcher until the test ends and waits until it is subscribed.
func startWatcher(t *testing.T, cfg Config) *watcherTest {
	t.Helper()
	wt := &watcherTest{t: t, sig: NewSignal(), obs: newCounts(), done: make(chan struct{})}
	cfg.Metrics = wt.obs.m
	wt.w = New(cfg, wt.sig)
	ctx, cancel := context.WithCancel(context.Background())
	wt.cancel = cancel
	go func() {
		defer close(wt.done)
		wt.w.Run(ctx)
	}()
	t.Cleanup(wt.stop)
	eventually(t, "the watcher is healthy", wt.w.Healthy)
	return wt
}

func (wt *watcherTest) stop() {
	wt.cancel()
	select {
	case <-wt.done:
	case <-time.After(wait):
		wt.t.Fatal("Run did not return after its context was cancelled")
	}
}

// waitSignal waits for the signal and returns the time of its first event.
func (wt *watcherTest) waitSignal() time.Time {
	wt.t.Helper()
	select {
	case <-wt.sig.C():
		return wt.sig.Take()
	case <-time.After(wait):
		wt.t.Fatal("signal not raised")
		return time.Time{}
	}
}

func (wt *watcherTest) noSignalPending() {
	wt.t.Helper()
	select {
	case <-wt.sig.C():
		events, _ := wt.obs.snapshot()
		wt.t.Fatalf("signal raised before the test changed anything (events %v)", events)
	default:
	}
}

func TestKernelAddressRaisesSignal(t *testing.T) {
	netnstest.Require(t)
	veth(t, "wa")
	wt := startWatcher(t, Config{})
	wt.noSignalPending()

	before := time.Now()
	netnstest.IP(t, "addr", "add", "192.0.2.10/24", "dev", "wa")
	if first := wt.waitSignal(); first.Before(before) {
		t.Errorf("signal's first event at %v, before the address was added at %v", first, before)
	}
	// Adding an address also adds its local and prefix routes; the address event itself must be
	// among them.
	eventually(t, "an address event is observed", func() bool {
		events, _ := wt.obs.snapshot()
		return slices.Contains(events, KindAddress)
	})
}

func TestKernelRouteRaisesSignal(t *testing.T) {
	netnstest.Require(t)
	veth(t, "wr")
	netnstest.IP(t, "addr", "add", "192.0.2.10/24", "dev", "wr")
	wt := startWatcher(t, Config{})
	wt.noSignalPending()

	before := time.Now()
	netnstest.IP(t, "route", "add", "default", "via", "192.0.2.1")
	if first := wt.waitSignal(); first.Before(before) {
		t.Errorf("signal's first event at %v, before the route was added at %v", first, before)
	}
	events, _ := wt.obs.snapshot()
	if len(events) == 0 || slices.ContainsFunc(events, func(k string) bool { return k != KindRoute }) {
		t.Errorf("events = %v, want only %q", events, KindRoute)
	}

	// A route in a table no rule uses is ignored until the resolver reports the table.
	netnstest.IP(t, "route", "add", "default", "via", "192.0.2.1", "table", "100")
	netnstest.IP(t, "route", "add", "198.51.100.0/24", "via", "192.0.2.1")
	wt.waitSignal()
	eventually(t, "the main-table route is observed", func() bool {
		events, _ := wt.obs.snapshot()
		return len(events) == 2
	})
	wt.w.SetRouteTables([]int{100})
	netnstest.IP(t, "route", "del", "default", "table", "100")
	wt.waitSignal()
	if events, _ := wt.obs.snapshot(); !slices.Equal(events, []string{KindRoute, KindRoute, KindRoute}) {
		t.Errorf("events = %v, want three route events (table 100 ignored, then watched)", events)
	}
}

// Policy rules of both families raise the signal, and the table a new rule points at is watched
// at once (before the resolver lists the rules again).
func TestKernelRuleRaisesSignal(t *testing.T) {
	netnstest.Require(t)
	veth(t, "wu")
	netnstest.IP(t, "addr", "add", "192.0.2.10/24", "dev", "wu")
	// No IPv6 address: the kernel announces one (and its prefix route) from a work queue, after
	// the watcher may have subscribed, and an IPv6 rule needs none.
	wt := startWatcher(t, Config{})
	wt.noSignalPending()

	before := time.Now()
	netnstest.IP(t, "rule", "add", "to", "198.51.100.0/24", "lookup", "100", "priority", "1000")
	t.Cleanup(func() { _, _ = runIP("rule", "del", "priority", "1000") })
	if first := wt.waitSignal(); first.Before(before) {
		t.Errorf("signal's first event at %v, before the rule was added at %v", first, before)
	}
	netnstest.IP(t, "route", "add", "default", "via", "192.0.2.1", "table", "100")
	wt.waitSignal()
	netnstest.IP(t, "-6", "rule", "add", "to", "2001:db8:100::/48", "lookup", "200", "priority", "1000")
	t.Cleanup(func() { _, _ = runIP("-6", "rule", "del", "priority", "1000") })
	wt.waitSignal()
	netnstest.IP(t, "rule", "del", "priority", "1000")
	wt.waitSignal()
	eventually(t, "the rule and route events are observed", func() bool {
		events, _ := wt.obs.snapshot()
		return len(events) == 4
	})
	if events, _ := wt.obs.snapshot(); !slices.Equal(events, []string{KindRoute, KindRule, KindRule, KindRule}) {
		t.Errorf("events = %v, want three rules (added, IPv6, deleted) and the route in table 100, learnt from the rule", events)
	}
}

func TestKernelLinkRaisesSignal(t *testing.T) {
	netnstest.Require(t)
	veth(t, "wl")
	wt := startWatcher(t, Config{})
	wt.noSignalPending()

	before := time.Now()
	netnstest.IP(t, "link", "set", "wl", "down")
	if first := wt.waitSignal(); first.Before(before) {
		t.Errorf("signal's first event at %v, before the link went down at %v", first, before)
	}
	eventually(t, "a link event is observed", func() bool {
		events, _ := wt.obs.snapshot()
		return slices.Contains(events, KindLink)
	})
}

func TestKernelRunStopsWithoutLeaks(t *testing.T) {
	netnstest.Require(t)
	before := runtime.NumGoroutine()
	wt := startWatcher(t, Config{})
	if n := runtime.NumGoroutine(); n <= before {
		t.Fatalf("%d goroutines while running, %d before: the watcher started none?", n, before)
	}
	wt.stop()
	eventually(t, "the watcher's goroutines are gone", func() bool { return runtime.NumGoroutine() <= before })
	if wt.w.Healthy() {
		t.Error("Healthy after Run returned")
	}
}

func TestKernelOverflowResubscribes(t *testing.T) {
	netnstest.Require(t)
	veth(t, "wo")
	// A tiny receive buffer (the kernel doubles it) overflows within a few messages of a flood.
	wt := startWatcher(t, Config{ReceiveBufferSize: 4096, MinBackoff: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
	wt.noSignalPending()

	// The flood goes to table 100, which the route filter ignores: any signal now comes from the
	// resubscription, not from the routes themselves.
	const n = 20000
	var add, del strings.Builder
	for i := range n {
		fmt.Fprintf(&add, "route add 10.%d.%d.%d/32 dev wo table 100\n", i>>16, (i>>8)&0xff, i&0xff)
		fmt.Fprintf(&del, "route del 10.%d.%d.%d/32 dev wo table 100\n", i>>16, (i>>8)&0xff, i&0xff)
	}
	batch := func(s string) {
		f := filepath.Join(t.TempDir(), "batch")
		if err := os.WriteFile(f, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		netnstest.IP(t, "-batch", f)
	}
	resubscribed := func() bool {
		_, resub := wt.obs.snapshot()
		return slices.Contains(resub, "route")
	}
	// On a loaded machine the kernel may schedule the watcher's reader often enough to keep up
	// with one flood; floods go on (a bounded number) until one overflows the buffer.
	flood := time.Now()
	for range 10 {
		batch(add.String())
		batch(del.String())
		if resubscribed() {
			break
		}
	}
	eventually(t, "the route subscription is resubscribed", resubscribed)
	eventually(t, "the watcher is healthy again", wt.w.Healthy)
	if first := wt.waitSignal(); first.Before(flood) {
		t.Errorf("signal's first event at %v, before the flood at %v", first, flood)
	}
	events, resub := wt.obs.snapshot()
	t.Logf("%d resubscriptions during the flood", len(resub))
	if len(events) != 0 {
		t.Errorf("%d events passed the filter (%v...), want none: table 100 is ignored", len(events), events[0])
	}
	for _, s := range resub {
		if s != "route" {
			t.Errorf("resubscribed %q, want only the route subscription to overflow", s)
		}
	}

	// The new subscription delivers.
	netnstest.IP(t, "addr", "add", "192.0.2.10/24", "dev", "wo")
	wt.waitSignal()
	eventually(t, "a route event on the new subscription", func() bool {
		events, _ := wt.obs.snapshot()
		return slices.Contains(events, KindRoute)
	})
}
