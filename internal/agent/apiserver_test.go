package agent

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"slices"
	"testing"
	"testing/synctest"

	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	typeddiscoveryv1 "k8s.io/client-go/kubernetes/typed/discovery/v1"
	k8stesting "k8s.io/client-go/testing"
)

// fakeSlices lets the informer list and watch the fake clientset, which cannot stream lists.
type fakeSlices struct {
	typeddiscoveryv1.EndpointSliceInterface
}

func (fakeSlices) IsWatchListSemanticsUnSupported() bool { return true }

func slice(name, service string, ready *bool, ips ...string) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default",
		Labels: map[string]string{discoveryv1.LabelServiceName: service}}, AddressType: discoveryv1.AddressTypeIPv4}
	for _, ip := range ips {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ready}})
	}
	return s
}

func addrs(ips ...string) []netip.Addr {
	var out []netip.Addr
	for _, ip := range ips {
		out = append(out, netip.MustParseAddr(ip))
	}
	return out
}

// The view is not settled until the first list answers; then it gives the kubeconfig's server
// first and the ready endpoints of the kubernetes slice, sorted, each once; a change kicks the loop.
func TestAPIServerView(t *testing.T) { synctest.Test(t, testAPIServerView) }

func testAPIServerView(t *testing.T) {
	no, yes := false, true
	client := fake.NewClientset(slice("kubernetes", "kubernetes", nil, "10.0.0.3", "10.0.0.1", "192.0.2.10"),
		slice("kubernetes-extra", "kubernetes", &no, "10.0.0.9"), slice("other", "other", &yes, "10.0.0.2"))
	v := newAPIServerView(APIServerConfig{Static: addrs("192.0.2.10"), Slices: fakeSlices{client.DiscoveryV1().EndpointSlices("default")}},
		slog.New(slog.DiscardHandler))
	kicks := make(chan struct{}, 16)
	if err := v.start(func() { kicks <- struct{}{} }); err != nil {
		t.Fatal(err)
	}
	if _, ok := v.addresses(); ok {
		t.Fatal("settled before the informer listed")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); v.run(ctx) }()
	defer func() { cancel(); <-done }()
	<-kicks
	want := addrs("192.0.2.10", "10.0.0.1", "10.0.0.3") // the not-ready slice's endpoint and the other Service's are left out
	waitAddrs(t, v, want)
	if _, err := client.DiscoveryV1().EndpointSlices("default").Update(context.Background(),
		slice("kubernetes", "kubernetes", &yes, "10.0.0.4"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitAddrs(t, v, addrs("192.0.2.10", "10.0.0.4"))
	if got := v.listOnce(context.Background()); !slices.Equal(got, addrs("192.0.2.10", "10.0.0.4")) {
		t.Errorf("listOnce = %v", got)
	}
}

// waitAddrs checks the informer's view once every goroutine of the bubble is blocked.
func waitAddrs(t *testing.T, v *apiServerView, want []netip.Addr) {
	t.Helper()
	synctest.Wait()
	if got, ok := v.addresses(); !ok || !slices.Equal(got, want) {
		t.Fatalf("addresses %v (settled %v), want %v", got, ok, want)
	}
}

// A refused list settles the view with the static addresses alone (the fallback targets then
// serve), and kicks the loop so that the first resolution does not wait forever.
func TestAPIServerViewListRefused(t *testing.T) { synctest.Test(t, testAPIServerViewListRefused) }

func testAPIServerViewListRefused(t *testing.T) {
	client := fake.NewClientset()
	client.PrependReactor("list", "endpointslices", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "discovery.k8s.io", Resource: "endpointslices"}, "", errors.New("RBAC"))
	})
	v := newAPIServerView(APIServerConfig{Slices: fakeSlices{client.DiscoveryV1().EndpointSlices("default")}}, slog.New(slog.DiscardHandler))
	kicks := make(chan struct{}, 16)
	if err := v.start(func() { kicks <- struct{}{} }); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); v.run(ctx) }()
	defer func() { cancel(); <-done }()
	<-kicks
	if got, ok := v.addresses(); !ok || len(got) != 0 {
		t.Errorf("addresses after a refused list = %v, %v; want none, settled", got, ok)
	}
	if got := v.listOnce(context.Background()); len(got) != 0 {
		t.Errorf("listOnce after a refused list = %v, want none", got)
	}
}
