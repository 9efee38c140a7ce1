package deploy

import (
	"context"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"

	"github.com/nodeaddr/nodeaddr/internal/kube"
	"github.com/nodeaddr/nodeaddr/test/harness"
)

// The agent reads the kubernetes EndpointSlice in default for the apiserver target, with RBAC's
// resourceNames (deploy/rbac.yaml): the API server authorizes a list or watch by name only when it
// selects metadata.name, so the agent's requests (kube.Client, with its selectors) pass, and every
// other read of EndpointSlices is refused. docs/security.md's rights table cites this test.
func TestAgentEndpointSliceRights(t *testing.T) {
	harness.RequireE2E(t)
	ctx := context.Background()
	cp := harness.StartControlPlane(t)
	cp.ApplyRBAC(t)
	cp.CreateNode(t, harness.NodeSpec{Name: "node-a"})
	token := cp.AgentToken(t, "node-a")
	cs := harness.TokenClient(t, cp, token)
	kc, err := kube.NewClient(&rest.Config{Host: cp.Config.Host, BearerToken: token,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true}}, kube.Scheme())
	if err != nil {
		t.Fatal(err)
	}
	const name, label = "metadata.name=kubernetes", "kubernetes.io/service-name=kubernetes"
	agentOpts := metav1.ListOptions{FieldSelector: name, LabelSelector: label}
	// The suite's API server reconciles no endpoints (it listens on loopback): the slice its
	// reconciler would write, and another Service's slice in default.
	for _, s := range []struct{ name, service, ip string }{{"kubernetes", "kubernetes", "192.0.2.10"}, {"other", "other", "192.0.2.20"}} {
		slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: s.name, Labels: map[string]string{discoveryv1.LabelServiceName: s.service}},
			AddressType: discoveryv1.AddressTypeIPv4, Endpoints: []discoveryv1.Endpoint{{Addresses: []string{s.ip}}}}
		if _, err := cp.Admin.DiscoveryV1().EndpointSlices("default").Create(ctx, slice, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	l, err := kc.EndpointSlices("default").List(ctx, agentOpts)
	if err != nil {
		t.Fatalf("the agent's list: %v", err)
	}
	if len(l.Items) != 1 || l.Items[0].Endpoints[0].Addresses[0] != "192.0.2.10" {
		t.Errorf("the agent's list: %v, want the kubernetes slice with 192.0.2.10", l.Items)
	}
	w, err := kc.EndpointSlices("default").Watch(ctx, agentOpts)
	if err != nil {
		t.Fatalf("the agent's watch: %v", err)
	}
	select {
	case ev := <-w.ResultChan():
		if ev.Type != watch.Added {
			t.Errorf("the agent's watch sent %s first, want ADDED: %v", ev.Type, ev.Object)
		}
	case <-time.After(30 * time.Second):
		t.Error("the agent's watch sent nothing in 30 s")
	}
	w.Stop()
	if _, err := cs.DiscoveryV1().EndpointSlices("default").Get(ctx, "kubernetes", metav1.GetOptions{}); err != nil {
		t.Errorf("get the kubernetes EndpointSlice: %v", err)
	}
	// Refused: what resourceNames does not name.
	refused := map[string]error{}
	_, refused["list without a name selector"] = cs.DiscoveryV1().EndpointSlices("default").List(ctx, metav1.ListOptions{LabelSelector: label})
	_, refused["list of another name"] = cs.DiscoveryV1().EndpointSlices("default").List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=other"})
	_, refused["watch without a name selector"] = cs.DiscoveryV1().EndpointSlices("default").Watch(ctx, metav1.ListOptions{})
	_, refused["get of another name"] = cs.DiscoveryV1().EndpointSlices("default").Get(ctx, "other", metav1.GetOptions{})
	_, refused["list in kube-system by name"] = cs.DiscoveryV1().EndpointSlices("kube-system").List(ctx, metav1.ListOptions{FieldSelector: name})
	_, refused["list across namespaces by name"] = cs.DiscoveryV1().EndpointSlices("").List(ctx, metav1.ListOptions{FieldSelector: name})
	for what, err := range refused {
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s: %v, want 403 Forbidden", what, err)
		}
	}
}
