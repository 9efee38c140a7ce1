package remediation

import (
	"context"
	"fmt"
	"net/http"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/nodeaddr/nodeaddr/internal/kube"
	"github.com/nodeaddr/nodeaddr/internal/leader"
	"github.com/nodeaddr/nodeaddr/internal/vocab"
)

// HostNetworkSelector narrows the Pod informer to hostNetwork pods: the API server serves
// spec.hostNetwork as a pod field selector (pkg/registry/core/pod/strategy.go, PodToSelectableFields).
var HostNetworkSelector = fields.OneTermEqualSelector("spec.hostNetwork", "true").String()

// Scheme holds what the remediator reads and writes, and nothing else (as csrapproval.Scheme: no
// clientset in the binary the agents run).
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	add := func(gv schema.GroupVersion, objs ...runtime.Object) {
		s.AddKnownTypes(gv, objs...)
		metav1.AddToGroupVersion(s, gv)
	}
	add(corev1.SchemeGroupVersion, &corev1.Node{}, &corev1.NodeList{}, &corev1.Pod{}, &corev1.PodList{},
		&corev1.Event{}, &corev1.EventList{})
	add(policyv1.SchemeGroupVersion, &policyv1.Eviction{})
	add(coordinationv1.SchemeGroupVersion, &coordinationv1.Lease{}, &coordinationv1.LeaseList{})
	return s
}

// API is the remediator's REST clients.
type API struct {
	scheme      *runtime.Scheme
	core, coord rest.Interface
	events      *kube.Client
}

// NewAPI builds the clients on cfg over hc (nil: one of its own).
func NewAPI(cfg *rest.Config, hc *http.Client) (*API, error) {
	a := &API{scheme: Scheme()}
	var err error
	if hc == nil {
		if hc, err = rest.HTTPClientFor(cfg); err != nil {
			return nil, fmt.Errorf("kubernetes client: %w", err)
		}
	}
	if a.core, err = kube.NewGroupClient(cfg, a.scheme, hc, corev1.SchemeGroupVersion); err != nil {
		return nil, err
	}
	if a.coord, err = kube.NewGroupClient(cfg, a.scheme, hc, coordinationv1.SchemeGroupVersion); err != nil {
		return nil, err
	}
	if a.events, err = kube.NewClientForConfigAndClient(cfg, a.scheme, hc); err != nil {
		return nil, err
	}
	return a, nil
}

// Scheme is the scheme of the remediator's objects, for its event recorder.
func (a *API) Scheme() *runtime.Scheme { return a.scheme }

// EventSink is where the remediator's event recorder writes.
func (a *API) EventSink() kube.EventSink { return a.events.EventSink() }

// Lease is the leader Lease's client.
func (a *API) Lease(namespace, name string) leader.LeaseClient {
	return leader.NewLeaseClient(a.coord, namespace, name, vocab.RemediatorFieldManager)
}

// Source is every Node, the hostNetwork pods, and the Eviction API.
func (a *API) Source() Source {
	lw := cache.NewFilteredListWatchFromClient
	return Source{
		Nodes: lw(a.core, "nodes", "", func(*metav1.ListOptions) {}),
		Pods:  lw(a.core, "pods", "", func(o *metav1.ListOptions) { o.FieldSelector = HostNetworkSelector }),
		Evict: func(ctx context.Context, p *corev1.Pod) error {
			return a.core.Post().Namespace(p.Namespace).Resource("pods").Name(p.Name).SubResource("eviction").
				// A 429 is the controller's to retry with its backoff, not the client's (a 429 with
				// Retry-After is otherwise retried in place up to 10 times, holding a worker).
				MaxRetries(0).Body(Eviction(p)).Do(ctx).Error()
		},
	}
}

// Eviction is the Eviction the remediator posts for p: the pod's own grace period (no
// deleteOptions), and only the pod of that UID, so that a replacement of the same name (a
// StatefulSet's) is never evicted for the stale pod it replaced.
func Eviction(p *corev1.Pod) *policyv1.Eviction {
	return &policyv1.Eviction{
		TypeMeta:      metav1.TypeMeta{APIVersion: policyv1.SchemeGroupVersion.String(), Kind: "Eviction"},
		ObjectMeta:    metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name},
		DeleteOptions: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.UID}},
	}
}
