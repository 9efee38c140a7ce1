package publisher

import (
	"context"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nodeaddr/nodeaddr/resolver"
)

// breakableWatches serves the Node watches from the fake clientset's tracker and returns a function
// that ends the open ones as the API server does when their resourceVersion is too old (410
// Expired), which makes the informer's reflector list again.
func (f *fixture) breakableWatches() (breakAll func()) {
	var mu sync.Mutex
	broken := make(chan struct{})
	f.client.PrependWatchReactor("nodes", func(a k8stesting.Action) (bool, watch.Interface, error) {
		inner, err := f.client.Tracker().Watch(nodesGVR, a.GetNamespace())
		if err != nil {
			return true, nil, err
		}
		mu.Lock()
		brk := broken
		mu.Unlock()
		ch := make(chan watch.Event)
		w := watch.NewProxyWatcher(ch)
		go func() {
			defer close(ch)
			defer inner.Stop()
			for {
				var ev watch.Event
				select {
				case e, ok := <-inner.ResultChan():
					if !ok {
						return
					}
					ev = e
				case <-brk:
					ev = watch.Event{Type: watch.Error, Object: &apierrors.NewResourceExpired("too old resource version").ErrStatus}
				case <-w.StopChan():
					return
				}
				select {
				case ch <- ev:
				case <-w.StopChan():
					return
				}
				if ev.Type == watch.Error {
					return
				}
			}
		}()
		return true, w, nil
	})
	return func() {
		mu.Lock()
		defer mu.Unlock()
		close(broken)
		broken = make(chan struct{})
	}
}

// While a write is failing, the informer's relist after a broken watch delivers the Node unchanged
// (same resourceVersion): the worker stays asleep until its retry delay ends, so a fleet that comes
// back from an outage keeps its retries spread. A real change to the Node still wakes it at once.
func TestRelistDoesNotBypassRetryBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, testNode("10", kubeletAddrs()), func(c *Config) {
			c.MinBackoff, c.MaxBackoff = time.Hour, time.Hour
		})
		var down atomic.Bool
		down.Store(true)
		f.client.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
			if down.Load() {
				return true, nil, apierrors.NewServiceUnavailable("apiserver restarting")
			}
			return false, nil, nil
		})
		breakWatches := f.breakableWatches()
		ctx, cancel := context.WithCancel(t.Context())
		done := f.run(ctx)
		settle := func() {
			time.Sleep(10 * time.Second) // more than the reflector's backoff before it lists again
			synctest.Wait()
		}
		f.p.Publish(externalState("203.0.113.7"), time.Now())
		settle()
		assertEqual(t, "writes after the first attempt", f.obs.Writes(), counted([]string{"addresses/error"}))

		down.Store(false)
		breakWatches()
		settle()
		if got := f.count("list"); got != 2 {
			t.Fatalf("%d lists, want 2: the broken watch did not make the informer list again", got)
		}
		assertEqual(t, "writes after the relist", f.obs.Writes(), counted([]string{"addresses/error"}))

		n := f.get(t).DeepCopy()
		n.Labels = map[string]string{"example.com/changed": "true"}
		if _, err := f.client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		settle()
		assertEqual(t, "writes after a real update", f.obs.Writes(), counted([]string{"addresses/error", "addresses/success"}))

		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v, want nil after cancel", err)
		}
	})
}

// Only an update that carries the Node's revision again is skipped.
func TestUnchangedUpdate(t *testing.T) {
	rv := func(v string) *corev1.Node { return testNode(v, nil) }
	for _, tc := range []struct {
		name   string
		old, o any
		want   bool
	}{
		{"relist: same resourceVersion", rv("10"), rv("10"), true},
		{"a write", rv("10"), rv("11"), false},
		{"no resourceVersion", rv(""), rv(""), false},
		{"not a Node", rv("10"), "10", false},
	} {
		if got := unchanged(tc.old, tc.o); got != tc.want {
			t.Errorf("%s: unchanged = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// Publishing the same state again (the resolver's resync) enqueues nothing, so it cannot bypass
// the retry backoff of a failed reconcile; a new state, or a new outcome of the provided-node-ip
// stage or the equal-ExternalIP rule (the taint and the warnings follow them), does.
func TestPublishEnqueuesOnlyChanges(t *testing.T) {
	f := newFixture(t, testNode("10", kubeletAddrs()))
	drain := func() {
		for f.p.queue.Len() > 0 {
			f.p.queue.Get()
			f.p.queue.Done()
		}
	}
	s := externalState("203.0.113.7")
	f.p.Publish(s, time.Now())
	drain()
	f.p.Publish(externalState("203.0.113.7"), time.Now())
	if n := f.p.queue.Len(); n != 0 {
		t.Errorf("the same state again queued %d reconciles, want 0", n)
	}
	s.NodeIP = resolver.NodeIPOutcome{Provided: []netip.Addr{netip.MustParseAddr("10.0.0.1")}, Missing: []netip.Addr{netip.MustParseAddr("10.0.0.1")}}
	f.p.Publish(s, time.Now())
	if n := f.p.queue.Len(); n != 1 {
		t.Errorf("a new provided-node-ip outcome queued %d reconciles, want 1", n)
	}
	drain()
	s.DroppedEqual = true
	f.p.Publish(s, time.Now())
	if n := f.p.queue.Len(); n != 1 {
		t.Errorf("an ExternalIP newly dropped for an equal InternalIP queued %d reconciles, want 1", n)
	}
	drain()
	f.p.Publish(externalState("203.0.113.8"), time.Now())
	if n := f.p.queue.Len(); n != 1 {
		t.Errorf("a new state queued %d reconciles, want 1", n)
	}
}
