package remediation

import (
	"context"
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
type API struct{ *leader.Clients }

// NewAPI builds the clients on cfg over hc (nil: one of its own).
func NewAPI(cfg *rest.Config, hc *http.Client) (*API, error) {
	c, err := leader.NewClients(cfg, hc, Scheme(), vocab.RemediatorFieldManager)
	if err != nil {
		return nil, err
	}
	return &API{c}, nil
}

// Source is every Node, the hostNetwork pods, and the Eviction API.
func (a *API) Source() Source {
	lw := cache.NewFilteredListWatchFromClient
	return Source{
		Nodes: lw(a.Core, "nodes", "", func(*metav1.ListOptions) {}),
		Pods:  lw(a.Core, "pods", "", func(o *metav1.ListOptions) { o.FieldSelector = HostNetworkSelector }),
		Evict: func(ctx context.Context, p *corev1.Pod) error {
			return a.Core.Post().Namespace(p.Namespace).Resource("pods").Name(p.Name).SubResource("eviction").
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
