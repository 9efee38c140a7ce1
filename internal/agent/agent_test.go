package agent

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	k8stesting "k8s.io/client-go/testing"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/nodeaddr/nodeaddr/publisher"
	"github.com/nodeaddr/nodeaddr/resolver"
	"github.com/nodeaddr/nodeaddr/watcher"
)

const nodeName = "node-a"

var target = netip.MustParseAddr("198.51.100.1")

// kernel routes every target through the first of its addresses.
type kernel struct {
	mu    sync.Mutex
	addrs []netip.Addr
	reads int // RouteSource calls
}

func (k *kernel) set(ips ...string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.addrs = k.addrs[:0]
	for _, ip := range ips {
		k.addrs = append(k.addrs, netip.MustParseAddr(ip))
	}
}

func (k *kernel) RouteSource(netip.Addr) (netip.Addr, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.reads++
	return k.addrs[0], nil
}

func (k *kernel) routeReads() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.reads
}

func (k *kernel) Addresses() ([]resolver.LocalAddr, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []resolver.LocalAddr
	for _, ip := range k.addrs {
		out = append(out, resolver.LocalAddr{IP: ip, LinkIndex: 2, Link: "eth0", PrefixLen: 24, PreferredLft: 0xFFFFFFFF})
	}
	return out, nil
}

// fakeNodes lets the informer list and watch the fake clientset, which cannot stream lists.
type fakeNodes struct{ typedcorev1.NodeInterface }

func (fakeNodes) IsWatchListSemanticsUnSupported() bool { return true }

var managed = []resolver.AddressType{resolver.ExternalIP}

func config(client *fake.Clientset, k *kernel, sig *watcher.Signal) Config {
	cfg := Config{
		NodeName: nodeName,
		Publisher: publisher.Config{RemoveTaint: true, Rate: 100, Burst: 10,
			MinBackoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond},
		Loop: resolver.LoopConfig{Kernel: k,
			Policy:   resolver.Policy{Managed: managed, Targets: []resolver.Target{{Type: resolver.ExternalIP, IP: target}}},
			Debounce: 100 * time.Millisecond, MaxDelay: time.Second},
		Trigger: sig,
	}
	if client != nil {
		cfg.Nodes = fakeNodes{client.CoreV1().Nodes()}
	}
	return cfg
}

func newAgent(t *testing.T, cfg Config) *Agent {
	t.Helper()
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func registered(podCIDR string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: nodeName, UID: "uid-a"},
		Spec: corev1.NodeSpec{PodCIDR: podCIDR,
			Taints: []corev1.Taint{{Key: cloudproviderapi.TaintExternalCloudProvider, Value: "true", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: nodeName}}},
	}
}

// newClient is a fake clientset holding nodes whose writes produce a new resourceVersion each, as
// the API server's do (the fake's tracker leaves them empty, and the publisher tells its own write's
// echo by its resourceVersion).
func newClient(nodes ...runtime.Object) *fake.Clientset {
	c := fake.NewClientset(nodes...)
	var rv atomic.Int64
	react := k8stesting.ObjectReaction(c.Tracker())
	gvr := corev1.SchemeGroupVersion.WithResource("nodes")
	c.PrependReactor("*", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if v := a.GetVerb(); v != "create" && v != "patch" && v != "update" {
			return false, nil, nil
		}
		handled, obj, err := react(a)
		if err != nil || obj == nil {
			return handled, obj, err
		}
		n := obj.(*corev1.Node).DeepCopy()
		n.ResourceVersion = strconv.FormatInt(rv.Add(1), 10)
		if err := c.Tracker().Update(gvr, n, ""); err != nil {
			return true, nil, err
		}
		return true, n, nil
	})
	return c
}

// patches lists the patch actions as "resource[/subresource]".
func patches(c *fake.Clientset) []string {
	var out []string
	for _, a := range c.Actions() {
		if pa, ok := a.(k8stesting.PatchAction); ok {
			r := pa.GetResource().Resource
			if s := pa.GetSubresource(); s != "" {
				r += "/" + s
			}
			out = append(out, r)
		}
	}
	return out
}

func addresses(t *testing.T, c *fake.Clientset) string {
	t.Helper()
	n, err := c.CoreV1().Nodes().Get(t.Context(), nodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprint(n.Status.Addresses, " taints=", len(n.Spec.Taints))
}

// The assembled agent: one informer feeds the loop (which waits for the Node) and the publisher (which writes once and removes the taint);
// a kernel change is written once more; a kernel signal that changes nothing writes nothing.
func TestAgent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := newClient()
		k := &kernel{}
		k.set("203.0.113.7", "10.244.0.1")
		sig := watcher.NewSignal()
		a := newAgent(t, config(client, k, sig))
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- a.Run(ctx) }()
		time.Sleep(time.Second)
		synctest.Wait()
		if err := a.Readyz(); err == nil {
			t.Fatal("ready without a Node")
		}
		if got := patches(client); len(got) != 0 {
			t.Fatalf("patches %v without a Node", got)
		}

		if _, err := client.CoreV1().Nodes().Create(ctx, registered("10.244.0.0/24"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if got, want := addresses(t, client), "[{ExternalIP 203.0.113.7} {Hostname node-a}] taints=0"; got != want {
			t.Fatalf("node %s, want %s", got, want)
		}
		if got := patches(client); !slices.Equal(got, []string{"nodes/status", "nodes"}) {
			t.Fatalf("patches %v, want one status write and one taint write", got)
		}
		if err := a.Readyz(); err != nil {
			t.Fatalf("not ready: %v", err)
		}
		if s := a.NodeState(); s.Tainted() || fmt.Sprint(s.DesiredAddresses()) != "[ExternalIP=203.0.113.7]" {
			t.Fatalf("node state for metrics: tainted %v, addresses %v", s.Tainted(), s.DesiredAddresses())
		}

		k.set("203.0.113.8", "10.244.0.1")
		sig.Raise(time.Now())
		time.Sleep(time.Second)
		synctest.Wait()
		if got, want := addresses(t, client), "[{ExternalIP 203.0.113.8} {Hostname node-a}] taints=0"; got != want {
			t.Fatalf("after the change: node %s, want %s", got, want)
		}
		sig.Raise(time.Now())
		time.Sleep(time.Second)
		synctest.Wait()
		if got := patches(client); len(got) != 3 {
			t.Fatalf("patches %v, want exactly one more (status) for the change and none for the no-op", got)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run = %v", err)
		}
	})
}

// RunOnce resolves with the Node's view and reconciles; without a cluster it prints the preview.
func TestRunOnce(t *testing.T) {
	client := newClient(registered(""))
	k := &kernel{}
	k.set("203.0.113.7")
	st, err := newAgent(t, config(client, k, nil)).RunOnce(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := st.String(), "[ExternalIP=203.0.113.7]"; got != want {
		t.Errorf("state %s, want %s", got, want)
	}
	if got, want := addresses(t, client), "[{ExternalIP 203.0.113.7} {Hostname node-a}] taints=0"; got != want {
		t.Errorf("node %s, want %s", got, want)
	}

	var out bytes.Buffer
	cfg := config(nil, k, nil)
	cfg.DryRun = &out
	if _, err := newAgent(t, cfg).RunOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), `{"addresses":[{"type":"ExternalIP","address":"203.0.113.7"}]}`+"\n"; got != want {
		t.Errorf("dry run printed %q, want %q", got, want)
	}
}
