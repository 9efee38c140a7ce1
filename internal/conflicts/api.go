package conflicts

import (
	"context"
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/nodeaddr/nodeaddr/internal/kube"
	"github.com/nodeaddr/nodeaddr/internal/leader"
	"github.com/nodeaddr/nodeaddr/internal/vocab"
)

// API is the detector's REST clients (no clientset, as for the approver: csrapproval.API).
type API struct {
	scheme      *runtime.Scheme
	core, coord rest.Interface
	events      *kube.Client
}

// NewAPI builds the clients on cfg.
func NewAPI(cfg *rest.Config) (*API, error) {
	s := kube.Scheme()
	s.AddKnownTypes(coordinationv1.SchemeGroupVersion, &coordinationv1.Lease{}, &coordinationv1.LeaseList{})
	metav1.AddToGroupVersion(s, coordinationv1.SchemeGroupVersion)
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	a := &API{scheme: s}
	if a.core, err = kube.NewGroupClient(cfg, s, hc, corev1.SchemeGroupVersion); err != nil {
		return nil, err
	}
	if a.coord, err = kube.NewGroupClient(cfg, s, hc, coordinationv1.SchemeGroupVersion); err != nil {
		return nil, err
	}
	if a.events, err = kube.NewClientForConfigAndClient(cfg, s, hc); err != nil {
		return nil, err
	}
	return a, nil
}

// Scheme is the scheme of the detector's objects, for its event recorder.
func (a *API) Scheme() *runtime.Scheme { return a.scheme }

// EventSink is where the detector's event recorder writes.
func (a *API) EventSink() kube.EventSink { return a.events.EventSink() }

// Lease is the leader Lease's client.
func (a *API) Lease(namespace, name string) leader.LeaseClient {
	return leader.NewLeaseClient(a.coord, namespace, name, vocab.ConflictsFieldManager)
}

// Source watches every Node and patches nodes/status as vocab.ConflictsFieldManager.
func (a *API) Source() Source {
	return Source{
		Nodes: cache.NewFilteredListWatchFromClient(a.core, "nodes", "", func(*metav1.ListOptions) {}),
		PatchStatus: func(ctx context.Context, node string, patch []byte) error {
			return a.core.Patch(types.StrategicMergePatchType).Resource("nodes").Name(node).SubResource("status").
				VersionedParams(&metav1.PatchOptions{FieldManager: vocab.ConflictsFieldManager}, metav1.ParameterCodec).
				Body(patch).Do(ctx).Error()
		},
	}
}
