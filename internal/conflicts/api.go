package conflicts

import (
	"context"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/nodeaddr/nodeaddr/internal/kube"
	"github.com/nodeaddr/nodeaddr/internal/leader"
	"github.com/nodeaddr/nodeaddr/internal/vocab"
)

// API is the detector's REST clients (no clientset, as for the approver: csrapproval.API).
type API struct{ *leader.Clients }

// NewAPI builds the clients on cfg.
func NewAPI(cfg *rest.Config) (*API, error) {
	s := kube.Scheme()
	s.AddKnownTypes(coordinationv1.SchemeGroupVersion, &coordinationv1.Lease{}, &coordinationv1.LeaseList{})
	metav1.AddToGroupVersion(s, coordinationv1.SchemeGroupVersion)
	c, err := leader.NewClients(cfg, nil, s, vocab.ConflictsFieldManager)
	if err != nil {
		return nil, err
	}
	return &API{c}, nil
}

// Source watches every Node and patches nodes/status as vocab.ConflictsFieldManager.
func (a *API) Source() Source {
	return Source{
		Nodes: cache.NewFilteredListWatchFromClient(a.Core, "nodes", "", func(*metav1.ListOptions) {}),
		PatchStatus: func(ctx context.Context, node string, patch []byte) error {
			return a.Core.Patch(types.StrategicMergePatchType).Resource("nodes").Name(node).SubResource("status").
				VersionedParams(&metav1.PatchOptions{FieldManager: vocab.ConflictsFieldManager}, metav1.ParameterCodec).
				Body(patch).Do(ctx).Error()
		},
	}
}
