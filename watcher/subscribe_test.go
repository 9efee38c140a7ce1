package watcher

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// fakeSub is one open fake subscription: what the library would hold.
type fakeSub struct {
	ch      any // chan of the kind's update type
	done    chan struct{}
	onError func(error)
	close   func() // closes ch, once: on overflow, or when done closes (the socket is closed)
}

// fakeSubscriber stands in for netlink: tests push updates, overflow a subscription (the library
// calls the error callback and closes the channel) or make subscribing fail. No socket, no root.
type fakeSubscriber struct {
	mu    sync.Mutex
	calls map[string]int
	fail  map[string]int // subscribe attempts still to fail, by kind
	open  map[string]*fakeSub
	dones []chan struct{}
}

func newFakeSubscriber() *fakeSubscriber {
	return &fakeSubscriber{calls: map[string]int{}, fail: map[string]int{}, open: map[string]*fakeSub{}}
}

func subscribe[T any](f *fakeSubscriber, kind string, ch chan T, done chan struct{}, onError func(error)) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[kind]++
	f.dones = append(f.dones, done)
	if f.fail[kind] > 0 {
		f.fail[kind]--
		return fmt.Errorf("socket: %w", unix.EMFILE)
	}
	closeCh := sync.OnceFunc(func() { close(ch) })
	go func() {
		<-done
		closeCh()
	}()
	f.open[kind] = &fakeSub{ch: ch, done: done, onError: onError, close: closeCh}
	return nil
}

func (f *fakeSubscriber) Addr(ch chan netlink.AddrUpdate, done chan struct{}, cb func(error)) error {
	return subscribe(f, KindAddress, ch, done, cb)
}
func (f *fakeSubscriber) Route(ch chan netlink.RouteUpdate, done chan struct{}, cb func(error)) error {
	return subscribe(f, KindRoute, ch, done, cb)
}
func (f *fakeSubscriber) Link(ch chan netlink.LinkUpdate, done chan struct{}, cb func(error)) error {
	return subscribe(f, KindLink, ch, done, cb)
}
func (f *fakeSubscriber) Rule(ch chan ruleUpdate, done chan struct{}, cb func(error)) error {
	return subscribe(f, KindRule, ch, done, cb)
}

func (f *fakeSubscriber) sub(kind string) *fakeSub {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.open[kind]
}

func (f *fakeSubscriber) count(kind string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[kind]
}

// send delivers u on the open subscription of its kind.
func send[T any](f *fakeSubscriber, kind string, u T) { f.sub(kind).ch.(chan T) <- u }

// overflow does what netlink v1.3.1 does on ENOBUFS: the error callback, then the channel closes.
func overflow(f *fakeSubscriber, kind string) {
	s := f.sub(kind)
	s.onError(fmt.Errorf("Receive failed: %v", unix.ENOBUFS)) //nolint:errorlint // netlink v1.3.1 wraps with %v, as here

	s.close()
}

type fakeTest struct {
	w    *Watcher
	sig  *Signal
	obs  counts
	subs *fakeSubscriber
	stop func()
}

// startFake runs a Watcher over a fake subscriber inside the synctest bubble and waits until it is
// subscribed.
func startFake(t *testing.T) *fakeTest {
	ft := &fakeTest{sig: NewSignal(), obs: newCounts(), subs: newFakeSubscriber()}
	ft.w = newWatcher(Config{Metrics: ft.obs.m}, ft.sig, ft.subs)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); ft.w.Run(ctx) }()
	ft.stop = func() { cancel(); <-done }
	synctest.Wait()
	return ft
}

// signalled takes the pending signal, if any.
func (ft *fakeTest) signalled() bool {
	select {
	case <-ft.sig.C():
		ft.sig.Take()
		return true
	default:
		return false
	}
}

var newAddr = netlink.AddrUpdate{LinkAddress: net.IPNet{IP: net.ParseIP("192.0.2.10"), Mask: net.CIDRMask(24, 32)},
	LinkIndex: 2, NewAddr: true, PreferedLft: 100}

// An overflowed subscription is resubscribed after the backoff, forces a resync (the signal) and
// counts a resubscription; its filter starts over, since messages were lost.
func TestOverflowResubscribesAndResyncs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ft := startFake(t)
		defer ft.stop()
		if !ft.w.Healthy() || ft.signalled() {
			t.Fatalf("after start: healthy %v, want healthy and no signal", ft.w.Healthy())
		}
		send(ft.subs, KindAddress, newAddr)
		synctest.Wait()
		if !ft.signalled() {
			t.Fatal("a new address raised no signal")
		}
		send(ft.subs, KindAddress, newAddr) // a lifetime refresh: filtered
		synctest.Wait()
		if ft.signalled() {
			t.Fatal("a repeated address raised the signal")
		}

		old := ft.subs.sub(KindAddress)
		overflow(ft.subs, KindAddress)
		synctest.Wait()
		if ft.w.Healthy() {
			t.Error("healthy while the address subscription is down")
		}
		select {
		case <-old.done:
		default:
			t.Error("the overflowed subscription's done is not closed (its socket would leak)")
		}
		time.Sleep(time.Second) // the backoff
		synctest.Wait()
		if got := ft.subs.count(KindAddress); got != 2 {
			t.Fatalf("%d address subscriptions, want 2", got)
		}
		if !ft.w.Healthy() || !ft.signalled() {
			t.Fatalf("after the resubscription: healthy %v, want healthy and a resync signal", ft.w.Healthy())
		}
		if _, resub := ft.obs.snapshot(); !slices.Equal(resub, []string{KindAddress}) {
			t.Errorf("resubscriptions %v, want [address]", resub)
		}
		send(ft.subs, KindAddress, newAddr) // the filter forgot it: messages were lost
		synctest.Wait()
		if !ft.signalled() {
			t.Error("the address seen before the overflow is filtered after it")
		}
		for _, k := range []string{KindRoute, KindLink, KindRule} {
			if got := ft.subs.count(k); got != 1 {
				t.Errorf("%d %s subscriptions, want 1 (only the address one overflowed)", got, k)
			}
		}
	})
}

// A failed subscribe is retried with a growing backoff; the first success is no resubscription.
func TestSubscribeFailureRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		subs := newFakeSubscriber()
		subs.fail[KindRoute] = 3
		obs := newCounts()
		sig := NewSignal()
		w := newWatcher(Config{Metrics: obs.m}, sig, subs)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { defer close(done); w.Run(ctx) }()
		synctest.Wait()
		if w.Healthy() {
			t.Fatal("healthy without a route subscription")
		}
		time.Sleep(100*time.Millisecond + 200*time.Millisecond + 400*time.Millisecond) // 0.1 s, doubling
		synctest.Wait()
		if got := subs.count(KindRoute); got != 4 || !w.Healthy() {
			t.Fatalf("%d route subscribe calls, healthy %v; want 4 and healthy", got, w.Healthy())
		}
		if _, resub := obs.snapshot(); len(resub) != 0 {
			t.Errorf("resubscriptions %v, want none (the first subscription succeeded late)", resub)
		}
		cancel()
		<-done
		subs.mu.Lock()
		defer subs.mu.Unlock()
		for i, d := range subs.dones {
			select {
			case <-d:
			default:
				t.Errorf("subscription %d's done not closed after Run returned", i)
			}
		}
	})
}

// Rule events: a rule that can move a lookup raises the signal, and the table it points at is
// watched from then on; no-op rules and other families are dropped.
func TestRuleEventsRaiseSignalAndWatchTheirTable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ft := startFake(t)
		defer ft.stop()
		inTable100 := netlink.RouteUpdate{Type: unix.RTM_NEWROUTE, Route: netlink.Route{Table: 100}}
		send(ft.subs, KindRoute, inTable100)
		synctest.Wait()
		if ft.signalled() {
			t.Fatal("a route in table 100, which no rule uses yet, raised the signal")
		}
		for _, u := range []ruleUpdate{
			{Type: unix.RTM_NEWRULE, Family: unix.AF_INET, Action: unix.FR_ACT_NOP},
			{Type: unix.RTM_NEWRULE, Family: unix.AF_BRIDGE, Action: unix.FR_ACT_TO_TBL, Table: 7},
		} {
			send(ft.subs, KindRule, u)
			synctest.Wait()
			if ft.signalled() {
				t.Errorf("rule %+v raised the signal", u)
			}
		}
		send(ft.subs, KindRule, ruleUpdate{Type: unix.RTM_NEWRULE, Family: unix.AF_INET6, Action: unix.FR_ACT_TO_TBL, Table: 100})
		synctest.Wait()
		if !ft.signalled() {
			t.Fatal("ip rule add ... lookup 100 raised no signal")
		}
		send(ft.subs, KindRoute, inTable100)
		synctest.Wait()
		if !ft.signalled() {
			t.Error("a route in table 100 is still dropped after a rule points there")
		}
		send(ft.subs, KindRule, ruleUpdate{Type: unix.RTM_DELRULE, Family: unix.AF_INET, Action: unix.FR_ACT_TO_TBL, Table: 100})
		synctest.Wait()
		if !ft.signalled() {
			t.Error("ip rule del raised no signal")
		}
		if events, _ := ft.obs.snapshot(); !slices.Equal(events, []string{KindRoute, KindRule, KindRule}) {
			t.Errorf("events %v", events)
		}
	})
}

// parseRule reads the rule header and a FRA_TABLE attribute (tables above 255).
func TestParseRule(t *testing.T) {
	hdr := nl.RtMsg{RtMsg: unix.RtMsg{Family: unix.AF_INET, Table: unix.RT_TABLE_UNSPEC, Type: unix.FR_ACT_TO_TBL}}
	attr := nl.NewRtAttr(unix.FRA_TABLE, nl.Uint32Attr(1000))
	data := append(hdr.Serialize(), attr.Serialize()...)
	u, ok := parseRule(syscall.NetlinkMessage{Header: syscall.NlMsghdr{Type: unix.RTM_NEWRULE}, Data: data})
	if want := (ruleUpdate{Type: unix.RTM_NEWRULE, Family: unix.AF_INET, Action: unix.FR_ACT_TO_TBL, Table: 1000}); !ok || u != want {
		t.Errorf("parseRule = %+v, %v; want %+v", u, ok, want)
	}
	if _, ok := parseRule(syscall.NetlinkMessage{Header: syscall.NlMsghdr{Type: unix.RTM_NEWROUTE}, Data: data}); ok {
		t.Error("a route message parsed as a rule")
	}
	short := syscall.NetlinkMessage{Header: syscall.NlMsghdr{Type: unix.RTM_DELRULE}, Data: data[:4]}
	if u, ok := parseRule(short); ok {
		t.Errorf("short message parsed as %+v", u)
	}
}
