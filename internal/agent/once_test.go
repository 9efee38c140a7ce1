package agent

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nodeaddr/nodeaddr/resolver"
)

var nodesGR = corev1.Resource("nodes")

// count is the number of actions with the verb.
func count(c *fake.Clientset, verb string) int {
	n := 0
	for _, a := range c.Actions() {
		if a.GetVerb() == verb {
			n++
		}
	}
	return n
}

// RunOnce resolves with what the Node holds, as the long-running agent's first resolution does:
// its pod CIDRs are excluded and its current address stays among equal candidates.
func TestRunOnceResolvesWithTheNode(t *testing.T) {
	node := registered("10.244.1.0/24")
	node.Status.Addresses = append(node.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "203.0.113.9"})
	client := newClient(node)
	k := &kernel{}
	// Every address is a candidate (an accepting CIDR rule); the route source is the pod-network one.
	k.set("10.244.1.1", "203.0.113.8", "203.0.113.9")
	cfg := config(client, k, nil)
	cfg.Loop.Policy.Types = map[resolver.AddressType]resolver.TypePolicy{resolver.ExternalIP: {
		CIDRs: []resolver.CIDRRule{{Prefix: netip.MustParsePrefix("0.0.0.0/0")}}}}
	st, err := newAgent(t, cfg).RunOnce(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := st.String(), "[ExternalIP=203.0.113.9]"; got != want {
		t.Errorf("state %s, want %s (the pod CIDR excluded, the Node's address kept over 203.0.113.8)", got, want)
	}
	if got, want := patches(client), []string{"nodes"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("patches %v, want only the taint removal", got)
	}

	// --default-exclusions=false: the pod CIDRs are selectable.
	k.set("10.244.1.1")
	cfg.AllowPodCIDRs = true
	if st, err = newAgent(t, cfg).RunOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got, want := st.String(), "[ExternalIP=10.244.1.1]"; got != want {
		t.Errorf("with AllowPodCIDRs: state %s, want %s", got, want)
	}
}

// A conflict re-reads the Node and retries on the publisher's schedule: the same reconcile as the
// long-running agent's.
func TestRunOnceRetriesConflicts(t *testing.T) {
	client := newClient(registered(""))
	var once atomic.Bool
	client.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		if once.CompareAndSwap(false, true) {
			return true, nil, apierrors.NewConflict(nodesGR, nodeName, errors.New("the object has been modified"))
		}
		return false, nil, nil
	})
	k := &kernel{}
	k.set("203.0.113.7")
	if _, err := newAgent(t, config(client, k, nil)).RunOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got, want := addresses(t, client), "[{ExternalIP 203.0.113.7} {Hostname node-a}] taints=0"; got != want {
		t.Errorf("node %s, want %s", got, want)
	}
	if got := count(client, "get"); got != 4 {
		t.Errorf("%d GETs, want 4 (read, re-read after the conflict, read for the retry, the test's own)", got)
	}
}

// In a synctest bubble the deadline and the backoffs are virtual: no real waiting.
func TestRunOnceMissingNode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := newClient()
		k := &kernel{}
		k.set("203.0.113.7")
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Millisecond)
		defer cancel()
		_, err := newAgent(t, config(client, k, nil)).RunOnce(ctx)
		if err == nil || !strings.Contains(err.Error(), `node "node-a" not found`) || !strings.Contains(err.Error(), "gave up") {
			t.Fatalf("RunOnce = %v, want an error saying the node was not found and it gave up", err)
		}
		if count(client, "get") < 2 || count(client, "patch") != 0 {
			t.Errorf("%d GETs and %d patches, want retried GETs and no patch", count(client, "get"), count(client, "patch"))
		}
	})
}

func TestRunOnceNodeDeletedDuringWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := newClient(registered(""))
		client.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewNotFound(nodesGR, nodeName)
		})
		k := &kernel{}
		k.set("203.0.113.7")
		a := newAgent(t, config(client, k, nil))
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Millisecond)
		defer cancel()
		if _, err := a.RunOnce(ctx); err == nil {
			t.Fatal("RunOnce succeeded although every write found no node")
		}
		if a.Readyz() == nil {
			t.Error("ready although nothing was written")
		}
	})
}

func TestRunOnceForbiddenReturnsAtOnce(t *testing.T) {
	for _, verb := range []string{"get", "patch"} {
		t.Run(verb, func(t *testing.T) {
			client := newClient(registered(""))
			client.PrependReactor(verb, "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewForbidden(nodesGR, nodeName, errors.New("system:serviceaccount:kube-system:nodeaddr cannot "+verb+" nodes"))
			})
			k := &kernel{}
			k.set("203.0.113.7")
			cfg := config(client, k, nil)
			cfg.Publisher.MinBackoff, cfg.Publisher.MaxBackoff = time.Minute, time.Minute // a retry would hit the deadline
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			_, err := newAgent(t, cfg).RunOnce(ctx)
			if !apierrors.IsForbidden(err) {
				t.Fatalf("RunOnce = %v, want Forbidden", err)
			}
			if ctx.Err() != nil {
				t.Fatal("RunOnce waited for the deadline")
			}
			if got := count(client, verb); got != 1 {
				t.Errorf("%d %s actions, want 1", got, verb)
			}
		})
	}
}

// A resolution that fails is returned at once: the kernel answered, a retry cannot help.
func TestRunOnceResolutionErrorReturnsAtOnce(t *testing.T) {
	client := newClient(registered(""))
	cfg := config(client, nil, nil)
	cfg.Loop.Kernel = failingKernel{}
	_, err := newAgent(t, cfg).RunOnce(t.Context())
	if err == nil || !strings.Contains(err.Error(), "netlink dump interrupted") {
		t.Fatalf("RunOnce = %v, want the resolution error", err)
	}
	if got := count(client, "get"); got != 1 {
		t.Errorf("%d GETs, want 1 (no retry)", got)
	}
}

type failingKernel struct{}

func (failingKernel) RouteSource(netip.Addr) (netip.Addr, error) {
	return netip.Addr{}, errors.New("netlink dump interrupted")
}
func (failingKernel) Addresses() ([]resolver.LocalAddr, error) { return nil, errors.New("unused") }
